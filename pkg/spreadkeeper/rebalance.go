package spreadkeeper

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// RebalanceOptions configure the rebalancer.
type RebalanceOptions struct {
	// DryRun only reports (log, event, metric) what would be evicted.
	DryRun bool
	// Interval between passes; Cooldown is how long a workload is left alone after one of its
	// replicas was evicted, on top of waiting until every replica is Ready again.
	Interval, Cooldown time.Duration
	// MaxSkew is the skew above which a workload is rebalanced (DomainSpread's maxSkew in Hard
	// mode, 1 in Soft mode).
	MaxSkew int
}

// Decision is one replica a pass chose to move.
type Decision struct {
	Pod       string // namespace/name
	Dimension string
	Skew      int
	// Result: evicted, dry_run, refused or error.
	Result string
	Err    error
}

// Rebalancer evicts, through the Eviction API (so PodDisruptionBudgets hold), one replica at a
// time of a workload whose spread drifted beyond MaxSkew (a zone lost and replaced, pods placed
// while pool-scheduler was down): the replica the removal order names first, in the most crowded
// domain. Its controller recreates it and DomainSpread places the new one in the least loaded
// domain. A workload is only touched while every replica is bound, Running and Ready and none is
// terminating, and not again within Cooldown.
type Rebalancer struct {
	k *Keeper
	o RebalanceOptions

	mu   sync.Mutex
	last map[workloadKey]time.Time
	// evicted is each workload's replica evicted last: the workload waits until the informer
	// no longer has it, so a cache that lags the eviction never makes a second one.
	evicted map[workloadKey]types.UID
	now     func() time.Time
}

// NewRebalancer builds a rebalancer reading the keeper's informers (Keeper.Run starts them).
func NewRebalancer(k *Keeper, o RebalanceOptions) (*Rebalancer, error) {
	if o.Interval <= 0 || o.Cooldown < 0 || o.MaxSkew < 1 {
		return nil, fmt.Errorf("rebalancer: interval %v must be positive, cooldown %v not negative, max skew %d at least 1", o.Interval, o.Cooldown, o.MaxSkew)
	}
	return &Rebalancer{k: k, o: o, last: map[workloadKey]time.Time{}, evicted: map[workloadKey]types.UID{}, now: time.Now}, nil
}

// Run passes every Interval until ctx ends (after the keeper's informers synced).
func (r *Rebalancer) Run(ctx context.Context) {
	if !waitSynced(ctx, r.k) {
		return
	}
	klog.FromContext(ctx).Info("Rebalancer started", "dryRun", r.o.DryRun, "interval", r.o.Interval, "maxSkew", r.o.MaxSkew)
	wait.UntilWithContext(ctx, func(ctx context.Context) { r.Pass(ctx) }, r.o.Interval)
}

func waitSynced(ctx context.Context, k *Keeper) bool {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return k.pods.HasSynced() && k.nodes.HasSynced(), nil
	}) == nil
}

// Pass looks at every workload once and moves at most one replica of each.
func (r *Rebalancer) Pass(ctx context.Context) []Decision {
	logger := klog.FromContext(ctx)
	var out []Decision
	keys := r.k.pods.GetIndexer().ListIndexFuncValues(byWorkload)
	sort.Strings(keys)
	for _, key := range keys {
		objs, err := r.k.pods.GetIndexer().ByIndex(byWorkload, key)
		if err != nil || len(objs) < 2 || r.evictionPending(objs) {
			continue
		}
		d, ok := r.decide(objs)
		if !ok {
			continue
		}
		w, _ := r.k.workloadOf(d.pod)
		r.mu.Lock()
		last, seen := r.last[w]
		r.mu.Unlock()
		if seen && r.now().Sub(last) < r.o.Cooldown {
			continue
		}
		dec := Decision{Pod: d.pod.Namespace + "/" + d.pod.Name, Dimension: d.dimension, Skew: d.skew}
		switch {
		case r.o.DryRun:
			dec.Result = "dry_run"
			r.event(d.pod, v1.EventTypeNormal, "WouldRebalance", fmt.Sprintf("dry run: would evict to lower the workload's %s skew of %d (max %d)", d.dimension, d.skew, r.o.MaxSkew))
		default:
			err := r.k.cs.PolicyV1().Evictions(d.pod.Namespace).Evict(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Namespace: d.pod.Namespace, Name: d.pod.Name},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(d.pod.UID))},
			})
			switch {
			case err == nil:
				dec.Result = "evicted"
				r.event(d.pod, v1.EventTypeNormal, "Rebalanced", fmt.Sprintf("evicted to lower the workload's %s skew of %d (max %d); its controller recreates it", d.dimension, d.skew, r.o.MaxSkew))
			case apierrors.IsTooManyRequests(err) || apierrors.IsForbidden(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				// 429: a PodDisruptionBudget allows no disruption now; tried again next pass.
				dec.Result, dec.Err = "refused", err
			default:
				dec.Result, dec.Err = "error", err
			}
			if err == nil || dec.Result == "refused" {
				r.mu.Lock()
				r.last[w] = r.now()
				if err == nil {
					r.evicted[w] = d.pod.UID
				}
				r.mu.Unlock()
			}
		}
		evictions.WithLabelValues(dec.Result).Inc()
		logger.Info("Rebalancing", "pod", dec.Pod, "dimension", dec.Dimension, "skew", dec.Skew, "maxSkew", r.o.MaxSkew, "result", dec.Result, "err", dec.Err)
		out = append(out, dec)
	}
	return out
}

// evictionPending reports whether the workload's last evicted replica is still in the cache.
func (r *Rebalancer) evictionPending(objs []any) bool {
	w, ok := r.k.workloadOf(objs[0].(*v1.Pod))
	if !ok {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	uid, ok := r.evicted[w]
	if !ok {
		return false
	}
	for _, obj := range objs {
		if obj.(*v1.Pod).UID == uid {
			return true
		}
	}
	delete(r.evicted, w)
	return false
}

func (r *Rebalancer) event(pod *v1.Pod, typ, reason, msg string) {
	if r.k.recorder != nil {
		r.k.recorder.Event(pod, typ, reason, msg)
	}
}

type victim struct {
	pod       *v1.Pod
	dimension string
	skew      int
}

// decide returns the replica to move, if the workload is settled and its spread exceeds MaxSkew
// on some dimension over the domains of the nodes its pods may use.
func (r *Rebalancer) decide(objs []any) (victim, bool) {
	dims := r.k.o.Spread.Dimensions
	var pods []*v1.Pod
	var replicas []Replica
	for _, obj := range objs {
		pod := obj.(*v1.Pod)
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		// One replica at a time: a workload with a replica pending, starting or terminating waits.
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !podutil.IsPodReady(pod) {
			return victim{}, false
		}
		nodeObj, ok, _ := r.k.nodes.GetIndexer().GetByKey(pod.Spec.NodeName)
		if !ok {
			return victim{}, false
		}
		pods = append(pods, pod)
		replicas = append(replicas, Replica{Name: pod.Name, Created: pod.CreationTimestamp.UnixNano(), Domains: r.k.domainList(nodeObj.(*v1.Node))})
	}
	if len(pods) < 2 {
		return victim{}, false
	}
	// Domains the workload may use: those of uncordoned nodes matching its required node affinity
	// (empty ones count: that is what a lost and replaced zone looks like).
	affinity := nodeaffinity.GetRequiredNodeAffinity(pods[0])
	counts := make([]map[string]int, len(dims))
	for d := range counts {
		counts[d] = map[string]int{}
	}
	for _, obj := range r.k.nodes.GetIndexer().List() {
		node := obj.(*v1.Node)
		if match, _ := affinity.Match(node); !match || node.Spec.Unschedulable {
			continue
		}
		for d, v := range r.k.domainList(node) {
			if v != "" {
				counts[d][v] += 0
			}
		}
	}
	for _, rep := range replicas {
		for d, v := range rep.Domains {
			if _, ok := counts[d][v]; ok && v != "" {
				counts[d][v]++
			}
		}
	}
	worst, worstDim := 0, -1
	// The host dimension of a workload with fewer replicas than hosts is skewed by design (0 or 1
	// per host is skew 1); any dimension beyond MaxSkew qualifies, the first one named.
	for d := range dims {
		if s := skewOf(counts[d]); s > r.o.MaxSkew && s > worst && worstDim < 0 {
			worst, worstDim = s, d
		}
	}
	if worstDim < 0 {
		return victim{}, false
	}
	// The replica a scale-down would remove first: the most crowded domains, dimension by dimension.
	first := RemovalOrder(replicas, len(dims))[0]
	return victim{pod: pods[first], dimension: dims[worstDim].Name, skew: worst}, true
}

func skewOf(counts map[string]int) int {
	first, lo, hi := true, 0, 0
	for _, n := range counts {
		if first || n < lo {
			lo = n
		}
		if first || n > hi {
			hi = n
		}
		first = false
	}
	return hi - lo
}
