package spreadkeeper

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// KeeperOptions configure the deletion-cost keeper.
type KeeperOptions struct {
	// SchedulerName is the profile whose pods are kept; Spread its DomainSpread args.
	SchedulerName string
	Spread        *config.DomainSpreadArgs
	// QPS and Burst bound the keeper's pod patches.
	QPS   float64
	Burst int
	// Settle is how long a workload's changes are gathered before its costs are computed again,
	// so that a scale event's pods are handled in one pass.
	Settle time.Duration
	// Workers compute workloads in parallel.
	Workers int
	// Off: no costs are written (the informers still serve the rebalancer).
	Off bool
}

// Validate reports the first option out of range.
func (o KeeperOptions) Validate() error {
	switch {
	case o.SchedulerName == "":
		return fmt.Errorf("the scheduler name is empty")
	case o.Spread == nil || len(o.Spread.Dimensions) == 0:
		return fmt.Errorf("no DomainSpread dimensions")
	case o.QPS <= 0 || o.Burst < 1:
		return fmt.Errorf("the write rate must be positive (qps %v, burst %d)", o.QPS, o.Burst)
	case o.Settle < 0:
		return fmt.Errorf("the settle time must not be negative, got %v", o.Settle)
	case o.Workers < 1:
		return fmt.Errorf("workers must be at least 1, got %d", o.Workers)
	}
	return nil
}

// workloadKey is a controller's replicas: its namespace and UID.
type workloadKey struct {
	namespace string
	uid       types.UID
}

const (
	byWorkload = "workload"
	byNode     = "node"
)

// Keeper keeps the deletion cost of every replica of the ReplicaSets (and ReplicationControllers)
// whose pods the profile spreads, so that a scale-down removes replicas from the most crowded
// domains first (RemovalOrder). It patches only the pods whose cost must change (AssignCosts),
// at most QPS per second. StatefulSets (scaled down by ordinal), Jobs and other owners do not
// read the annotation and are left alone.
type Keeper struct {
	cs       kubernetes.Interface
	o        KeeperOptions
	recorder record.EventRecorder
	factory  informers.SharedInformerFactory
	pods     cache.SharedIndexInformer
	nodes    cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[workloadKey]
	limiter  flowcontrol.RateLimiter

	mu      sync.Mutex
	pending map[workloadKey]bool
	// changed is when each workload last changed: its sync waits until it has been quiet for
	// Settle (the queue alone would run it Settle after the first change of a burst).
	changed map[workloadKey]time.Time
	busy    int
	patches atomic.Int64
}

// NewKeeper builds the keeper; Run starts it.
func NewKeeper(cs kubernetes.Interface, recorder record.EventRecorder, o KeeperOptions) (*Keeper, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	k := &Keeper{
		cs: cs, o: o, recorder: recorder,
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[workloadKey](), workqueue.TypedRateLimitingQueueConfig[workloadKey]{Name: "deletion-cost"}),
		limiter: flowcontrol.NewTokenBucketRateLimiter(float32(o.QPS), o.Burst),
		pending: map[workloadKey]bool{},
		changed: map[workloadKey]time.Time{},
	}
	// Only this profile's pods: the apiserver filters them (spec.schedulerName is a pod field selector).
	k.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(trimNode))
	k.pods = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.schedulerName", o.SchedulerName).String()
	}), informers.WithTransform(trimPod)).Core().V1().Pods().Informer()
	k.nodes = k.factory.Core().V1().Nodes().Informer()
	if err := k.pods.AddIndexers(cache.Indexers{
		byWorkload: func(obj any) ([]string, error) {
			if w, ok := k.workloadOf(obj.(*v1.Pod)); ok {
				return []string{w.namespace + "/" + string(w.uid)}, nil
			}
			return nil, nil
		},
		byNode: func(obj any) ([]string, error) {
			if n := obj.(*v1.Pod).Spec.NodeName; n != "" {
				return []string{n}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, err
	}
	enqueuePod := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if pod, ok := obj.(*v1.Pod); ok {
			if w, ok := k.workloadOf(pod); ok {
				k.enqueue(w)
			}
		}
	}
	if _, err := k.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePod,
		UpdateFunc: func(_, obj any) { enqueuePod(obj) },
		DeleteFunc: enqueuePod,
	}); err != nil {
		return nil, err
	}
	if _, err := k.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			oldNode, newNode := oldObj.(*v1.Node), newObj.(*v1.Node)
			if k.domainsOf(oldNode) == k.domainsOf(newNode) {
				return
			}
			pods, _ := k.pods.GetIndexer().ByIndex(byNode, newNode.Name)
			for _, obj := range pods {
				enqueuePod(obj)
			}
		},
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// workloadOf returns the pod's workload if the keeper keeps its costs: a ReplicaSet or
// ReplicationController owns it (their controller reads the annotation) and DomainSpread
// spreads it (no spread constraints of its own unless spreadPodsWithConstraints).
func (k *Keeper) workloadOf(pod *v1.Pod) (workloadKey, bool) {
	ref, ok := spread.DeletionCostOwner(pod)
	if !ok {
		return workloadKey{}, false
	}
	if len(pod.Spec.TopologySpreadConstraints) > 0 && !k.o.Spread.SpreadPodsWithConstraints {
		return workloadKey{}, false
	}
	return workloadKey{namespace: pod.Namespace, uid: ref.UID}, true
}

// domainsOf is the node's domain in every dimension, joined by newlines (DomainSpread's rule:
// the first key present; a joint dimension is the tuple with the previous ones).
func (k *Keeper) domainsOf(node *v1.Node) string {
	return strings.Join(k.domainList(node), "\n")
}

func (k *Keeper) domainList(node *v1.Node) []string {
	dims := k.o.Spread.Dimensions
	out := make([]string, len(dims))
	for d, dim := range dims {
		v, ok := pool.FirstPresentLabel(dim.LabelKeys, node.Labels)
		if !ok {
			continue
		}
		if dim.Joint {
			parts := []string{}
			for p := 0; p < d; p++ {
				pv, ok := pool.FirstPresentLabel(dims[p].LabelKeys, node.Labels)
				if !ok {
					v = ""
					break
				}
				parts = append(parts, pv)
			}
			if v != "" {
				v = strings.Join(append(parts, v), "/")
			}
		}
		out[d] = v
	}
	return out
}

func (k *Keeper) enqueue(w workloadKey) {
	k.mu.Lock()
	k.changed[w] = time.Now()
	k.mu.Unlock()
	k.enqueueAfter(w, k.o.Settle)
}

func (k *Keeper) enqueueAfter(w workloadKey, d time.Duration) {
	k.mu.Lock()
	k.pending[w] = true
	k.mu.Unlock()
	k.queue.AddAfter(w, d)
}

// inFlightWait bounds how long the keeper leaves a workload alone while some of its pods are
// being scheduled (see inFlight): past it, a scheduler that never judges them does not stop the
// keeper.
const inFlightWait = 30 * time.Second

// inFlight reports, for a pod not on a node, how much longer the keeper waits for the scheduler
// to place or judge it: 0 once it is judged unschedulable (PodScheduled False), terminating, or
// older than inFlightWait. While a burst of replicas is bound, the bound ones are not a prefix of
// the placement order, and removing them cheapest first need not keep the bound: judged then,
// the costs DomainSpread's bindings give would be rewritten for nothing.
func inFlight(pod *v1.Pod, now time.Time) time.Duration {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			return 0
		}
	}
	return max(0, inFlightWait-now.Sub(pod.CreationTimestamp.Time))
}

// Idle reports whether every change seen has been handled (for tests and logs).
func (k *Keeper) Idle() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pending) == 0 && k.busy == 0
}

// Patches is the number of pod patches the keeper has sent.
func (k *Keeper) Patches() int64 { return k.patches.Load() }

// Run starts the informers and workers and returns when ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	defer k.queue.ShutDown()
	k.factory.Start(ctx.Done())
	go k.pods.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), k.pods.HasSynced, k.nodes.HasSynced) {
		return fmt.Errorf("deletion-cost keeper: informers did not sync")
	}
	if k.o.Off {
		<-ctx.Done()
		return nil
	}
	klog.FromContext(ctx).Info("Deletion-cost keeper started", "schedulerName", k.o.SchedulerName, "qps", k.o.QPS, "settle", k.o.Settle)
	for range k.o.Workers {
		go wait.UntilWithContext(ctx, k.work, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (k *Keeper) work(ctx context.Context) {
	for {
		w, shutdown := k.queue.Get()
		if shutdown {
			return
		}
		k.mu.Lock()
		delete(k.pending, w)
		k.busy++
		k.mu.Unlock()
		err := k.sync(ctx, w)
		k.mu.Lock()
		k.busy--
		if err != nil && ctx.Err() == nil {
			k.pending[w] = true
		}
		k.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			syncs.WithLabelValues("error").Inc()
			klog.FromContext(ctx).Error(err, "Keeping deletion costs", "namespace", w.namespace, "workload", w.uid)
			k.queue.AddRateLimited(w)
		} else {
			syncs.WithLabelValues("success").Inc()
			k.queue.Forget(w)
		}
		k.queue.Done(w)
	}
}

// sync computes the workload's removal order and patches the pods whose cost must change.
func (k *Keeper) sync(ctx context.Context, w workloadKey) error {
	now := time.Now()
	k.mu.Lock()
	quiet := now.Sub(k.changed[w])
	k.mu.Unlock()
	if quiet < k.o.Settle {
		// Changed again since it was queued (a scale event's pods come over a while).
		k.enqueueAfter(w, k.o.Settle-quiet)
		return nil
	}
	objs, err := k.pods.GetIndexer().ByIndex(byWorkload, w.namespace+"/"+string(w.uid))
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		k.mu.Lock()
		delete(k.changed, w)
		k.mu.Unlock()
		return nil
	}
	var wait time.Duration
	for _, obj := range objs {
		wait = max(wait, inFlight(obj.(*v1.Pod), now))
	}
	if wait > 0 {
		// Their bindings bring the workload back; the backstop is for a scheduler that is down.
		k.enqueueAfter(w, wait)
		return nil
	}
	var pods []*v1.Pod
	var replicas []Replica
	for _, obj := range objs {
		pod := obj.(*v1.Pod)
		// Unbound, terminating and finished pods go first anyway (or are gone): not ranked.
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		nodeObj, ok, _ := k.nodes.GetIndexer().GetByKey(pod.Spec.NodeName)
		if !ok {
			continue
		}
		r := Replica{Name: pod.Name, Created: pod.CreationTimestamp.UnixNano(), Domains: k.domainList(nodeObj.(*v1.Node))}
		r.Cost, r.HasCost = spread.DeletionCostOf(pod)
		pods = append(pods, pod)
		replicas = append(replicas, r)
	}
	if len(replicas) < 2 {
		return nil
	}
	dims := len(k.o.Spread.Dimensions)
	if Holds(replicas, dims) {
		// The costs already remove replicas in an order that keeps the spread (DomainSpread's
		// bindings give them in placement order): nothing to write.
		return nil
	}
	costs, changed := AssignCosts(replicas, RemovalOrder(replicas, dims))
	var errs []error
	for i, pod := range pods {
		if !changed[i] {
			continue
		}
		if err := k.limiter.Wait(ctx); err != nil {
			return err
		}
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, pod.UID, spread.DeletionCostAnnotation, strconv.Itoa(int(costs[i])))
		_, err := k.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "pool-scheduler-deletion-cost"})
		k.patches.Add(1)
		switch {
		case err == nil:
			patchesTotal.WithLabelValues("success").Inc()
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone or replaced: the informer brings the change, and the workload is computed again.
			patchesTotal.WithLabelValues("gone").Inc()
		default:
			patchesTotal.WithLabelValues("error").Inc()
			if k.recorder != nil {
				k.recorder.Eventf(pod, v1.EventTypeWarning, "DeletionCostNotWritten", "pool-scheduler could not write %s=%d: %v", spread.DeletionCostAnnotation, costs[i], err)
			}
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing deletion costs: %v", errs)
	}
	return nil
}
