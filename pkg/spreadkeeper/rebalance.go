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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// RebalanceOptions configure the rebalancer.
type RebalanceOptions struct {
	// DryRun only reports (log, event, metric) what would be evicted.
	DryRun bool
	// Interval between passes; Cooldown is how long a workload is left alone after one of its
	// replicas was evicted, on top of waiting until every replica is Ready again. A workload the
	// rebalancer could not help (no fit, protected replicas, skew not lowered by its last
	// eviction) waits Cooldown x 2^(failures-1), at most MaxBackoff.
	Interval, Cooldown, MaxBackoff time.Duration
	// MaxSkew is the skew above which a workload is rebalanced (DomainSpread's maxSkew in Hard
	// mode, 1 in Soft mode).
	MaxSkew int
	// MaxPerPass, MaxPerNode and MaxPerNamespace cap the evictions of one pass in all, off one
	// node and in one namespace (the descheduler's maxNoOfPodsToEvictTotal, PerNode, PerNamespace).
	MaxPerPass, MaxPerNode, MaxPerNamespace int
	// System is SystemPoolGuard's policy (nil: none): its system pods are never evicted, and a
	// node it keeps a pod off is no place for the pod's replacement.
	System *pool.SystemPolicy
	// Pools reads a node's pool (NodePoolReady's poolLabelKeys): a workload on, or able to move
	// to, a node of a pool that upgrades is left alone until the upgrade ends.
	Pools pool.Identity
	// Degraded (nil: never) returns why pool-scheduler is degraded, or "" while it is healthy:
	// a pass evicts nothing while it returns a reason (the hand-off controller's verdict,
	// read from its switch: handoff.SwitchWatch).
	Degraded func() string
}

// Validate reports the first option out of range, by its flag's name.
func (o RebalanceOptions) Validate() error {
	switch {
	case o.Interval <= 0:
		return fmt.Errorf("--rebalance-interval must be positive, got %v", o.Interval)
	case o.Cooldown < 0:
		return fmt.Errorf("--rebalance-cooldown must not be negative, got %v", o.Cooldown)
	case o.MaxBackoff < o.Cooldown || o.MaxBackoff <= 0:
		return fmt.Errorf("--rebalance-max-backoff must be positive and at least --rebalance-cooldown (%v), got %v", o.Cooldown, o.MaxBackoff)
	case o.MaxSkew < 1:
		return fmt.Errorf("the rebalancer's max skew must be at least 1, got %d", o.MaxSkew)
	case o.MaxPerPass < 1:
		return fmt.Errorf("--rebalance-max-per-pass must be at least 1, got %d", o.MaxPerPass)
	case o.MaxPerNode < 1:
		return fmt.Errorf("--rebalance-max-per-node must be at least 1, got %d", o.MaxPerNode)
	case o.MaxPerNamespace < 1:
		return fmt.Errorf("--rebalance-max-per-namespace must be at least 1, got %d", o.MaxPerNamespace)
	}
	return nil
}

// PreventEvictionAnnotation on a pod (any value) keeps the rebalancer from evicting it.
const PreventEvictionAnnotation = "pool-scheduler.io/prevent-eviction"

// DeschedulerNoEvictionAnnotation is the descheduler's soft opt-out
// (sigs.k8s.io/descheduler pkg/descheduler/evictions/utils SoftNoEvictionAnnotationKey), which
// its DefaultEvictor makes binding with noEvictionPolicy Mandatory; the rebalancer always does.
const DeschedulerNoEvictionAnnotation = "descheduler.alpha.kubernetes.io/prefer-no-eviction"

// KarpenterDoNotDisruptAnnotation "true" on a pod keeps Karpenter from disrupting it
// (sigs.k8s.io/karpenter pkg/apis/v1/labels.go DoNotDisruptAnnotationKey, compared with "true"
// by pkg/utils/pod/scheduling.go HasDoNotDisrupt); the rebalancer does not evict it either.
const KarpenterDoNotDisruptAnnotation = "karpenter.sh/do-not-disrupt"

// SafeToEvictAnnotation "false" on a pod keeps cluster-autoscaler from draining its node
// (k8s.io/autoscaler cluster-autoscaler/utils/drain/drain.go PodSafeToEvictKey,
// hasNotSafeToEvictAnnotation); the rebalancer does not evict it either. "true" (which lifts
// cluster-autoscaler's own local-storage and kube-system protections) changes nothing here.
const SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"

// Why a replica was not evicted (the reason label of pool_scheduler_rebalance_skipped_total).
const (
	SkipSystemCritical  = "system_critical"  // priority at or above system-cluster-critical's
	SkipSystemPod       = "system_pod"       // a system pod by SystemPoolGuard's policy
	SkipLocalStorage    = "local_storage"    // an emptyDir or hostPath volume
	SkipOptedOut        = "opted_out"        // PreventEvictionAnnotation or the descheduler's
	SkipDoNotDisrupt    = "do_not_disrupt"   // Karpenter's do-not-disrupt, cluster-autoscaler's safe-to-evict=false
	SkipPoolUpgrading   = "pool_upgrading"   // a pool it is on or may move to upgrades
	SkipNoFit           = "no_fit"           // no node in a less crowded domain would take it
	SkipSkewNotLowered  = "skew_not_lowered" // the workload's last eviction did not lower its skew
	SkipLimitPass       = "limit_pass"       // MaxPerPass reached
	SkipLimitNode       = "limit_node"       // MaxPerNode reached on its node
	SkipLimitNamespace  = "limit_namespace"  // MaxPerNamespace reached in its namespace
	systemCriticalValue = 2000000000         // k8s.io/kubernetes pkg/apis/scheduling SystemCriticalPriority
)

// Decision is one replica a pass chose to move, or a workload it left alone and why.
type Decision struct {
	Pod       string // namespace/name
	Dimension string
	Skew      int
	// Result: evicted, dry_run, refused, error or skipped (Reason says why).
	Result string
	Reason string
	// Backoff is how long the workload is now left alone (skipped for a reason that backs off).
	Backoff time.Duration
	Err     error
}

// workloadState is what the rebalancer remembers of a workload between passes.
type workloadState struct {
	// next: the workload is left alone until then (cooldown or backoff).
	next time.Time
	// failures counts passes in a row that could not help it (the backoff's exponent).
	failures int
	// evicted is its replica evicted last: the workload waits until the informer no longer has
	// it, so a cache that lags the eviction never makes a second one; skew and dimension are its
	// skew then, which the next decision must find lower.
	evicted   types.UID
	skew      int
	dimension string
}

// Rebalancer evicts, through the Eviction API (so PodDisruptionBudgets hold), one replica at a
// time of a workload whose spread drifted beyond MaxSkew (a zone lost and replaced, pods placed
// while pool-scheduler was down): the first replica in the removal order, in the most crowded
// domain, that may be evicted and whose replacement fits a node of a less crowded domain. Its
// controller recreates it and DomainSpread places the new one. A workload is only touched while
// every replica is bound, Running and Ready and none is terminating, not within Cooldown of its
// last eviction, and not while backing off. Each pass evicts at most MaxPerPass replicas, at
// most MaxPerNode off one node and MaxPerNamespace in one namespace.
type Rebalancer struct {
	k *Keeper
	o RebalanceOptions
	// all is every pod not finished (any scheduler's), indexed by node: the requests a node's
	// allocatable already carries.
	all     cache.SharedIndexInformer
	started sync.Once

	// rollouts follows the pools' upgrades, fed by the keeper's node informer.
	rollouts *maintenance.Rollouts

	mu    sync.Mutex
	state map[workloadKey]*workloadState
	now   func() time.Time
	// pausedWhy is the reason the last pass paused for ("" when it did not).
	pausedWhy string
}

// NewRebalancer builds a rebalancer reading the keeper's informers (Keeper.Run starts them) and
// its own of every pod (Start starts it).
func NewRebalancer(k *Keeper, o RebalanceOptions) (*Rebalancer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Only what the fit check reads is kept of every pod (trimPod).
	all := informers.NewSharedInformerFactoryWithOptions(k.cs, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.AndSelectors(
			fields.OneTermNotEqualSelector("status.phase", string(v1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(v1.PodFailed))).String()
	}), informers.WithTransform(trimPod)).Core().V1().Pods().Informer()
	if err := all.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if n := obj.(*v1.Pod).Spec.NodeName; n != "" {
			return []string{n}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	r := &Rebalancer{k: k, o: o, all: all, rollouts: maintenance.NewRollouts(o.Pools), state: map[workloadKey]*workloadState{}, now: time.Now}
	if _, err := k.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.nodeChanged(obj) },
		UpdateFunc: func(_, obj any) { r.nodeChanged(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				r.rollouts.Delete(n.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Rebalancer) nodeChanged(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		r.rollouts.Upsert(n)
	}
}

// paused returns why the pass evicts nothing ("" if it may), and reports a change of it.
func (r *Rebalancer) paused(logger klog.Logger) string {
	why := ""
	if r.o.Degraded != nil {
		why = r.o.Degraded()
	}
	r.mu.Lock()
	was := r.pausedWhy
	r.pausedWhy = why
	r.mu.Unlock()
	if why != "" {
		pausedGauge.Set(1)
		if why != was {
			logger.Info("Rebalancer paused: pool-scheduler is degraded; nothing is evicted until it is healthy again", "reason", why)
		}
		return why
	}
	pausedGauge.Set(0)
	if was != "" {
		logger.Info("Rebalancer resumed: pool-scheduler is healthy again")
	}
	return ""
}

// Start starts the rebalancer's informer of every pod and waits until it and the keeper's have
// synced; false if ctx ended first.
func (r *Rebalancer) Start(ctx context.Context) bool {
	r.started.Do(func() { go r.all.Run(ctx.Done()) })
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return r.k.pods.HasSynced() && r.k.nodes.HasSynced() && r.all.HasSynced(), nil
	}) == nil
}

// Run passes every Interval until ctx ends (after the informers synced).
func (r *Rebalancer) Run(ctx context.Context) {
	if !r.Start(ctx) {
		return
	}
	klog.FromContext(ctx).Info("Rebalancer started", "dryRun", r.o.DryRun, "interval", r.o.Interval, "maxSkew", r.o.MaxSkew,
		"maxPerPass", r.o.MaxPerPass, "maxPerNode", r.o.MaxPerNode, "maxPerNamespace", r.o.MaxPerNamespace)
	wait.UntilWithContext(ctx, func(ctx context.Context) { r.Pass(ctx) }, r.o.Interval)
}

// passLimits counts a pass's evictions against the caps.
type passLimits struct {
	o           *RebalanceOptions
	total       int
	byNode      map[string]int
	byNamespace map[string]int
}

func (l *passLimits) refuses(pod *v1.Pod) string {
	switch {
	case l.total >= l.o.MaxPerPass:
		return SkipLimitPass
	case l.byNamespace[pod.Namespace] >= l.o.MaxPerNamespace:
		return SkipLimitNamespace
	case l.byNode[pod.Spec.NodeName] >= l.o.MaxPerNode:
		return SkipLimitNode
	}
	return ""
}

func (l *passLimits) count(pod *v1.Pod) {
	l.total++
	l.byNamespace[pod.Namespace]++
	l.byNode[pod.Spec.NodeName]++
}

// Pass looks at every workload once and moves at most one replica of each, within the caps.
func (r *Rebalancer) Pass(ctx context.Context) []Decision {
	logger := klog.FromContext(ctx)
	if r.paused(logger) != "" {
		return nil
	}
	var out []Decision
	limits := &passLimits{o: &r.o, byNode: map[string]int{}, byNamespace: map[string]int{}}
	var nodes []*v1.Node
	for _, obj := range r.k.nodes.GetIndexer().List() {
		nodes = append(nodes, obj.(*v1.Node))
	}
	keys := r.k.pods.GetIndexer().ListIndexFuncValues(byWorkload)
	sort.Strings(keys)
	for _, key := range keys {
		objs, err := r.k.pods.GetIndexer().ByIndex(byWorkload, key)
		if err != nil || len(objs) < 2 {
			continue
		}
		w, ok := r.k.workloadOf(objs[0].(*v1.Pod))
		if !ok {
			continue
		}
		pods := make([]*v1.Pod, 0, len(objs))
		for _, obj := range objs {
			pods = append(pods, obj.(*v1.Pod))
		}
		r.mu.Lock()
		st := r.state[w]
		if st == nil {
			st = &workloadState{}
			r.state[w] = st
		}
		hold := r.evictionPending(st, pods) || r.now().Before(st.next)
		r.mu.Unlock()
		if hold {
			continue
		}
		p, ok := r.decide(pods, nodes, limits)
		if !ok {
			// Balanced (or unsettled): whatever comes next is judged afresh.
			if p.balanced {
				r.mu.Lock()
				st.failures, st.skew, st.dimension = 0, 0, ""
				r.mu.Unlock()
			}
			continue
		}
		dec := Decision{Dimension: p.dimension, Skew: p.skew}
		if p.pod != nil {
			dec.Pod = p.pod.Namespace + "/" + p.pod.Name
		} else {
			dec.Pod = pods[0].Namespace + "/" + pods[0].Name
		}
		r.mu.Lock()
		switch {
		case st.dimension == p.dimension && st.skew > 0 && p.skew >= st.skew && p.skip == "":
			// The last eviction did not lower the skew: the replacement went back, or something
			// else moved; evicting again would repeat it.
			p.skip, p.about = SkipSkewNotLowered, p.pod
		case st.skew > 0 && (st.dimension != p.dimension || p.skew < st.skew):
			st.failures = 0
		}
		r.mu.Unlock()
		switch {
		case p.skip != "":
			dec.Result, dec.Reason = "skipped", p.skip
			if p.about != nil {
				dec.Pod = p.about.Namespace + "/" + p.about.Name
			}
			if backsOff(p.skip) {
				dec.Backoff = r.backOff(w)
			}
			skipped.WithLabelValues(p.skip).Inc()
			if backsOff(p.skip) && p.about != nil {
				r.event(p.about, v1.EventTypeNormal, "RebalanceSkipped", fmt.Sprintf("not evicted to lower the workload's %s skew of %d (max %d): %s; the workload is left alone for %v",
					p.dimension, p.skew, r.o.MaxSkew, skipMessage(p.skip), dec.Backoff))
			}
		case r.o.DryRun:
			dec.Result = "dry_run"
			limits.count(p.pod)
			r.event(p.pod, v1.EventTypeNormal, "WouldRebalance", fmt.Sprintf("dry run: would evict to lower the workload's %s skew of %d (max %d)", p.dimension, p.skew, r.o.MaxSkew))
		default:
			err := r.k.cs.PolicyV1().Evictions(p.pod.Namespace).Evict(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Namespace: p.pod.Namespace, Name: p.pod.Name},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.pod.UID))},
			})
			switch {
			case err == nil:
				dec.Result = "evicted"
				limits.count(p.pod)
				r.event(p.pod, v1.EventTypeNormal, "Rebalanced", fmt.Sprintf("evicted to lower the workload's %s skew of %d (max %d); its controller recreates it", p.dimension, p.skew, r.o.MaxSkew))
			case apierrors.IsTooManyRequests(err) || apierrors.IsForbidden(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				// 429: a PodDisruptionBudget allows no disruption now (tried again after the
				// cooldown); 403: RBAC or the eviction policy (backs off).
				dec.Result, dec.Err = "refused", err
			default:
				dec.Result, dec.Err = "error", err
			}
			if apierrors.IsForbidden(err) {
				// RBAC or the eviction policy (a namespace outside the keeper's bound) answers
				// the same next time: back off rather than ask every cooldown.
				dec.Backoff = r.backOff(w)
			} else if err == nil || dec.Result == "refused" {
				r.mu.Lock()
				st.next = r.now().Add(r.o.Cooldown)
				if err == nil {
					st.evicted, st.skew, st.dimension = p.pod.UID, p.skew, p.dimension
				}
				r.mu.Unlock()
			}
		}
		if dec.Result != "skipped" {
			evictions.WithLabelValues(dec.Result).Inc()
		}
		logger.Info("Rebalancing", "pod", dec.Pod, "dimension", dec.Dimension, "skew", dec.Skew, "maxSkew", r.o.MaxSkew,
			"result", dec.Result, "reason", dec.Reason, "backoff", dec.Backoff, "err", dec.Err)
		out = append(out, dec)
	}
	return out
}

// backsOff: skips that a later pass would only repeat. The caps are per pass, and an upgrade
// ends when its last node is replaced: not those.
func backsOff(reason string) bool {
	return reason != SkipLimitPass && reason != SkipLimitNode && reason != SkipLimitNamespace && reason != SkipPoolUpgrading
}

func skipMessage(reason string) string {
	switch reason {
	case SkipSystemCritical:
		return "its replicas have system-critical priority"
	case SkipSystemPod:
		return "its replicas are system pods (SystemPoolGuard)"
	case SkipLocalStorage:
		return "its replicas use local storage (emptyDir or hostPath)"
	case SkipOptedOut:
		return "its replicas are annotated " + PreventEvictionAnnotation + " or " + DeschedulerNoEvictionAnnotation
	case SkipDoNotDisrupt:
		return "its replicas are annotated " + KarpenterDoNotDisruptAnnotation + "=true or " + SafeToEvictAnnotation + "=false"
	case SkipPoolUpgrading:
		return "a pool it is on or may move to is upgrading"
	case SkipNoFit:
		return "no node of a less crowded domain would take the replacement (taints, node affinity, cordon, allocatable, system pool)"
	case SkipSkewNotLowered:
		return "its last eviction did not lower the skew"
	}
	return reason
}

// backOff counts a failure of the workload and returns how long it is left alone:
// Cooldown x 2^(failures-1), at most MaxBackoff (and at least Interval).
func (r *Rebalancer) backOff(w workloadKey) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state[w]
	st.failures++
	d := max(r.o.Cooldown, r.o.Interval)
	for i := 1; i < st.failures && d < r.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.o.MaxBackoff)
	st.next = r.now().Add(d)
	// The skew to beat is forgotten: after backing off the workload is judged afresh.
	st.skew, st.dimension = 0, ""
	return d
}

// evictionPending reports whether the workload's last evicted replica is still in the cache;
// once it is gone, an eviction that lowered the skew resets the backoff.
func (r *Rebalancer) evictionPending(st *workloadState, pods []*v1.Pod) bool {
	if st.evicted == "" {
		return false
	}
	for _, pod := range pods {
		if pod.UID == st.evicted {
			return true
		}
	}
	st.evicted = ""
	return false
}

func (r *Rebalancer) event(pod *v1.Pod, typ, reason, msg string) {
	if r.k.recorder != nil {
		r.k.recorder.Event(pod, typ, reason, msg)
	}
}

// plan is a pass's verdict on one workload: the replica to evict, or why none (skip, about the
// replica that reason concerns).
type plan struct {
	pod       *v1.Pod
	dimension string
	skew      int
	skip      string
	about     *v1.Pod
	// balanced: no dimension's skew exceeds MaxSkew (rather than a workload not yet settled).
	balanced bool
}

// decide returns what to do with a workload, if it is settled and its spread exceeds MaxSkew on
// some dimension over the domains of the nodes its pods may use (false: nothing to do).
func (r *Rebalancer) decide(objs []*v1.Pod, nodes []*v1.Node, limits *passLimits) (plan, bool) {
	dims := r.k.o.Spread.Dimensions
	var pods []*v1.Pod
	var replicas []Replica
	var onNodes []*v1.Node
	for _, pod := range objs {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		// One replica at a time: a workload with a replica pending, starting or terminating waits.
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !podutil.IsPodReady(pod) {
			return plan{}, false
		}
		nodeObj, ok, _ := r.k.nodes.GetIndexer().GetByKey(pod.Spec.NodeName)
		if !ok {
			return plan{}, false
		}
		pods = append(pods, pod)
		onNodes = append(onNodes, nodeObj.(*v1.Node))
		replicas = append(replicas, Replica{Name: pod.Name, Created: pod.CreationTimestamp.UnixNano(), Domains: r.k.domainList(nodeObj.(*v1.Node))})
	}
	if len(pods) < 2 {
		return plan{}, false
	}
	// Domains the workload may use: those of uncordoned nodes matching its required node affinity
	// (empty ones count: that is what a lost and replaced zone looks like). A domain whose nodes
	// are tainted, full or system nodes still counts here, as it does for the descheduler; the
	// fit check below keeps it from drawing evictions.
	affinity := nodeaffinity.GetRequiredNodeAffinity(pods[0])
	counts := make([]map[string]int, len(dims))
	for d := range counts {
		counts[d] = map[string]int{}
	}
	nodeDomains := make([][]string, len(nodes))
	// The pools the workload would act on: its replicas' and those it may move to.
	var usable []*v1.Node
	for i, node := range nodes {
		nodeDomains[i] = r.k.domainList(node)
		if match, _ := affinity.Match(node); !match || node.Spec.Unschedulable {
			continue
		}
		usable = append(usable, node)
		for d, v := range nodeDomains[i] {
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
		if s := spread.Skew(counts[d]); s > r.o.MaxSkew && worstDim < 0 {
			worst, worstDim = s, d
		}
	}
	if worstDim < 0 {
		return plan{balanced: true}, false
	}
	out := plan{dimension: dims[worstDim].Name, skew: worst}
	// While a pool it would act on upgrades, the platform moves its replicas anyway (and the
	// skew counts nodes on their way out): an eviction now would only add a move.
	if view := r.rollouts.View(); view.Upgrading() {
		upgrading := map[string]bool{}
		for _, p := range view.UpgradingPools() {
			upgrading[p] = true
		}
		for _, node := range append(usable, onNodes...) {
			if p, ok := r.o.Pools.PoolOf(node.Labels); ok && upgrading[p] {
				out.skip, out.about = SkipPoolUpgrading, pods[RemovalOrder(replicas, len(dims))[0]]
				return out, true
			}
		}
	}
	hi := 0
	for _, n := range counts[worstDim] {
		hi = max(hi, n)
	}
	// Candidates in the order a scale-down would remove them; only those in a most crowded
	// domain of the skewed dimension lower its skew. The first reason met is reported.
	for _, i := range RemovalOrder(replicas, len(dims)) {
		pod, from := pods[i], replicas[i].Domains[worstDim]
		if counts[worstDim][from] != hi {
			continue
		}
		reason := r.protected(pod)
		if reason == "" && limits != nil {
			reason = limits.refuses(pod)
		}
		if reason == "" && !r.fitsElsewhere(pod, nodes, nodeDomains, worstDim, counts[worstDim], hi) {
			reason = SkipNoFit
		}
		if reason == "" {
			out.pod, out.skip, out.about = pod, "", nil
			return out, true
		}
		if out.skip == "" || (!backsOff(reason) && backsOff(out.skip)) {
			// A cap reached outranks a protection: the workload is tried again next pass.
			out.skip, out.about = reason, pod
		}
	}
	if out.skip == "" {
		return plan{}, false
	}
	return out, true
}

// protected returns why pod may not be evicted at all, or "" (the descheduler's DefaultEvictor
// protections: system-critical, local storage, opted out; and what Karpenter and
// cluster-autoscaler honour, which the descheduler does not: do-not-disrupt, safe-to-evict
// false; mirror, static and DaemonSet pods never reach here: only ReplicaSet and
// ReplicationController replicas are workloads).
func (r *Rebalancer) protected(pod *v1.Pod) string {
	switch {
	case pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalValue:
		return SkipSystemCritical
	case r.o.System != nil && r.o.System.IsSystemPod(pod):
		return SkipSystemPod
	}
	if _, ok := pod.Annotations[PreventEvictionAnnotation]; ok {
		return SkipOptedOut
	}
	if _, ok := pod.Annotations[DeschedulerNoEvictionAnnotation]; ok {
		return SkipOptedOut
	}
	if pod.Annotations[KarpenterDoNotDisruptAnnotation] == "true" || pod.Annotations[SafeToEvictAnnotation] == "false" {
		return SkipDoNotDisrupt
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir != nil || vol.HostPath != nil {
			return SkipLocalStorage
		}
	}
	return ""
}

// fitsElsewhere reports whether some node other than pod's, in a domain of dimension dim that
// holds at most hi-2 replicas (so the move lowers the skew there and raises no other domain to
// the top), would take a copy of pod now.
func (r *Rebalancer) fitsElsewhere(pod *v1.Pod, nodes []*v1.Node, nodeDomains [][]string, dim int, counts map[string]int, hi int) bool {
	for i, node := range nodes {
		v := nodeDomains[i][dim]
		n, ok := counts[v]
		if !ok || v == "" || n > hi-2 || node.Name == pod.Spec.NodeName {
			continue
		}
		if Fits(pod, node, r.podsOn(node.Name), r.o.System) == "" {
			return true
		}
	}
	return false
}

func (r *Rebalancer) podsOn(node string) []*v1.Pod {
	objs, _ := r.all.GetIndexer().ByIndex(byNode, node)
	out := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(*v1.Pod))
	}
	return out
}
