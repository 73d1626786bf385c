package handoff

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// The switch: a ConfigMap whose data the MutatingAdmissionPolicy reads as its parameter
// (paramRef), so the policy, which has no clock, hands pods over only while this controller
// judges pool-scheduler healthy. The controller writes it; nothing else should.
const (
	// SwitchConfigMap is the switch's default name (in pool-scheduler's namespace).
	SwitchConfigMap = "pool-scheduler-handoff"
	// SwitchKey holds "true" while pods are handed to pool-scheduler, anything else while not.
	SwitchKey = "handoff"
	// SwitchReasonKey says why pods are not handed over.
	SwitchReasonKey = "reason"
)

var (
	// Only the leader reports the verdict gauges: a standby exports no series (a vec without
	// labels has none until set), so min() over the replicas is the leader's.
	handoffGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff",
		Help: "1 while the hand-off controller judges pool-scheduler healthy (its leader renews its Lease and kube-apiserver's version is served by its line) and sets the switch on, 0 while new pods keep the default scheduler (degraded). Reported by the controller's leader only.",
	}, nil)
	leaderGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff_leader_healthy",
		Help: "1 while pool-scheduler's leader renews its Lease and its heartbeat shows it scheduling (within --progress-bound) as the hand-off controller sees it, 0 while no healthy leader exists. Reported by the controller's leader only.",
	}, nil)
	waitingPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff_waiting_pods",
		Help: "Pods that wait for pool-scheduler (name it, not bound, pending, not terminating, not gated), by owner: recreatable (ReplicaSet, StatefulSet, ReplicationController: handed back when stranded), job, bare, other (only reported).",
	}, []string{"owner"})
	oldestWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff_oldest_waiting_pod_seconds",
		Help: "Age of the oldest pod that waits for pool-scheduler; 0 when none does. Reported by the hand-off controller's leader only.",
	}, nil)
	handedBack = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_handoff_handed_back_total",
		Help: "Pods the hand-off controller deleted so their controller recreates them through admission (which leaves new pods to the default scheduler while the hand-off is off), because admission had handed them over and they waited for pool-scheduler longer than --handback-after while it had no healthy leader; at most one per owner and outage; by the owner's kind.",
	}, []string{"kind"})
	strandedReported = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_handoff_stranded_reported_total",
		Help: "Stranded pods reported (an event) and not handed back, once each, by reason: not-handed-over (admission did not hand it over: its template names pool-scheduler), replacement-waits (its owner's pod was handed back in this outage and the replacement waits for pool-scheduler again), bare, job, other (no controller known to recreate it).",
	}, []string{"reason"})
	handbackErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pool_scheduler_handoff_handback_errors_total",
		Help: "Hand-backs that failed (a refused or failed delete); retried at the next sync.",
	})
	switchErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pool_scheduler_handoff_switch_errors_total",
		Help: "Failed reads or writes of the switch ConfigMap (missing, or refused); retried at the next sync. While it fails, the MutatingAdmissionPolicy follows the switch's last value, and a missing switch skips the policy altogether (pods keep the default scheduler, without the system-node affinity).",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(handoffGauge, leaderGauge, version.APIServerSupported, waitingPods, oldestWaiting, handedBack, strandedReported, handbackErrors, switchErrors)
}

func setGauge(g prometheus.Gauge, ok bool) {
	if ok {
		g.Set(1)
	} else {
		g.Set(0)
	}
}

// Controller is the hand-off controller's leader: Run it; tests call Sync.
type Controller struct {
	cs       kubernetes.Interface
	dc       discovery.ServerVersionInterface
	recorder record.EventRecorder
	o        Options
	now      func() time.Time
	limiter  flowcontrol.RateLimiter

	Judge *Judge
	lease *LeaseWatch
	skew  *SkewCheck
	pods  toolscache.SharedIndexInformer

	progress *Progress // nil: the Lease alone

	mu         sync.Mutex
	reported   sets.Set[types.UID] // pods reported as stranded and not handed back
	lastSkew   time.Time
	verdict    *bool     // the verdict last announced with an event
	leaderDown time.Time // since when no healthy leader exists; zero while one does
	leaderUp   time.Time // since when a healthy leader exists; zero while none does
	// owners handed back in this outage: a replacement that waits again is reported, never
	// deleted again, so no owner's pods loop. Scoped to the outage (a healthy verdict ends it),
	// and forgotten once a leader has been healthy for HandbackAfter.
	owners *ownerMemory
}

// New builds the controller; now is the clock.
func New(cs kubernetes.Interface, dc discovery.ServerVersionInterface, recorder record.EventRecorder, o Options, now func() time.Time) (*Controller, error) {
	lw, err := NewLeaseWatch(cs, o.Lease, now)
	if err != nil {
		return nil, err
	}
	skew := &SkewCheck{Gauge: version.APIServerSupported.WithLabelValues()}
	// Only the pods that wait for the scheduler: a pod leaves the cache when it is bound.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.AndSelectors(
			fields.OneTermEqualSelector("spec.schedulerName", o.SchedulerName),
			fields.OneTermEqualSelector("spec.nodeName", "")).String()
	}), informers.WithTransform(trimWaitingPod))
	pods := factory.Core().V1().Pods().Informer()
	leader := lw.Healthy
	var progress *Progress
	if o.ProgressBound > 0 {
		if progress, err = NewProgress(cs, lw, pods, o.ProgressBound, now); err != nil {
			return nil, err
		}
		progress.WedgedGauge, progress.AgeGauge = wedgedGauge.WithLabelValues(), progressAge.WithLabelValues()
		leader = progress.Leader(lw)
	}
	return &Controller{
		cs: cs, dc: dc, recorder: recorder, o: o, now: now,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(float32(o.HandbackQPS), 1),
		Judge:    &Judge{Skew: skew, Leader: leader, Gauge: handoffGauge.WithLabelValues()},
		lease:    lw,
		skew:     skew,
		pods:     pods,
		reported: sets.New[types.UID](),
		owners:   newOwnerMemory(now, time.Time{}, ""),
		progress: progress,
	}, nil
}

// Run syncs every Interval until ctx ends, once the pods are read. It does not wait for the
// Lease: one it may not read (RBAC naming another) is a degraded verdict with that reason.
func (c *Controller) Run(ctx context.Context) error {
	if !c.Start(ctx) {
		return ctx.Err()
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Sync(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Hand-off sync failed; retrying")
		}
	}, c.o.Interval)
	return nil
}

// Start runs the informers until ctx ends and waits until the pods are read, and the Lease too
// for at most its lease duration (a Lease it may not read must not hold the controller up; one
// not read yet would turn the switch off for nothing at a restart). False: ctx ended.
func (c *Controller) Start(ctx context.Context) bool {
	go c.lease.Run(ctx)
	if c.progress != nil {
		go c.progress.Run(ctx)
	}
	go c.pods.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced) {
		return false
	}
	leaseCtx, cancel := context.WithTimeout(ctx, c.o.Lease.Duration)
	defer cancel()
	if !toolscache.WaitForCacheSync(leaseCtx.Done(), c.lease.HasSynced) {
		klog.FromContext(ctx).Info("The scheduler's Lease is not read yet; judging without it", "lease", c.o.Lease.Lease)
	}
	return ctx.Err() == nil
}

// Pods is the controller's cache of the pods that name the scheduler and are not bound.
func (c *Controller) Pods() toolscache.Store { return c.pods.GetStore() }

// Sync judges, writes the switch, reports the waiting pods and hands back the stranded ones.
func (c *Controller) Sync(ctx context.Context) error {
	now := c.now()
	c.mu.Lock()
	checkSkew := c.lastSkew.IsZero() || now.Sub(c.lastSkew) >= 10*time.Minute
	if checkSkew {
		c.lastSkew = now
	}
	c.mu.Unlock()
	if checkSkew {
		c.skew.Check(ctx, c.dc)
	}
	handOver, reason := c.Judge.Evaluate(ctx)
	c.announce(handOver, reason)
	var errs []error
	if err := c.writeSwitch(ctx, handOver, reason); err != nil {
		switchErrors.Inc()
		errs = append(errs, err)
	}
	// Pods are stranded only while no leader schedules them: a version skew stops new
	// hand-offs, but the running replicas still schedule what was handed to them.
	leaderOK, leaderWhy := c.Judge.Leader(ctx)
	setGauge(leaderGauge.WithLabelValues(), leaderOK)
	c.mu.Lock()
	switch {
	case leaderOK:
		if !c.leaderDown.IsZero() {
			// The outage is over, however briefly: pods handed over from now on are handed
			// back like any other if the leader fails again.
			c.owners.recovered()
		}
		c.leaderDown = time.Time{}
		if c.leaderUp.IsZero() {
			c.leaderUp = now
		}
	case c.leaderDown.IsZero():
		c.leaderDown, c.leaderUp = now, time.Time{}
	}
	down, up := c.leaderDown, c.leaderUp
	c.mu.Unlock()
	if leaderOK && now.Sub(up) >= c.o.HandbackAfter {
		c.owners.forget()
	}
	stranded := !leaderOK && c.o.Handback && now.Sub(down) >= c.o.HandbackAfter
	if err := c.sweep(ctx, now, stranded, leaderWhy); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// announce records an event on the switch (on the scheduler's Lease without one) when the
// verdict changes: HandoffStopped with the reason (no healthy leader, or kube-apiserver outside
// the line's version skew), HandoffResumed.
func (c *Controller) announce(handOver bool, reason string) {
	c.mu.Lock()
	changed := c.verdict == nil || *c.verdict != handOver
	first := c.verdict == nil
	c.verdict = &handOver
	c.mu.Unlock()
	if !changed || (first && handOver) {
		return
	}
	ref := &v1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: c.o.Lease.Lease.Namespace, Name: c.o.Lease.Lease.Name}
	if c.o.Switch.Name != "" {
		ref = &v1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: c.o.Switch.Namespace, Name: c.o.Switch.Name}
	}
	if handOver {
		c.recorder.Eventf(ref, v1.EventTypeNormal, "HandoffResumed", "New pods are handed to %s again", c.o.SchedulerName)
		return
	}
	c.recorder.Eventf(ref, v1.EventTypeWarning, "HandoffStopped", "New pods keep the default scheduler: %s", reason)
}

// writeSwitch sets the switch to the verdict when it differs.
func (c *Controller) writeSwitch(ctx context.Context, handOver bool, reason string) error {
	if c.o.Switch.Name == "" {
		return nil
	}
	cms := c.cs.CoreV1().ConfigMaps(c.o.Switch.Namespace)
	cm, err := cms.Get(ctx, c.o.Switch.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the switch ConfigMap %s is missing: the MutatingAdmissionPolicy is skipped altogether until it exists (new pods keep the default scheduler, without the system-node affinity); restore it: helm upgrade (the chart), or kubectl apply -k manifests/handoff (kustomize)", c.o.Switch)
		}
		return fmt.Errorf("reading the switch %s: %w", c.o.Switch, err)
	}
	want := map[string]string{SwitchKey: strconv.FormatBool(handOver)}
	if !handOver {
		want[SwitchReasonKey] = reason
	}
	// The reason is written with the value, not kept current: it names ages, and a write per
	// sync would be a write every few seconds for as long as the outage lasts.
	if cm.Data[SwitchKey] == want[SwitchKey] {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	delete(cm.Data, SwitchReasonKey)
	for k, v := range want {
		cm.Data[k] = v
	}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the switch %s: %w", c.o.Switch, err)
	}
	klog.FromContext(ctx).Info("Switch written", "configMap", c.o.Switch, "handoff", handOver, "reason", reason)
	return nil
}

// sweep counts the waiting pods and, when stranded, hands back those that waited at least
// HandbackAfter, admission handed over and a controller recreates: deleted (as listed), once per
// owner in an outage, with an event on the controller. Every other stranded pod is reported
// once, with an event, never deleted: a pod whose template names pool-scheduler (recreated, it
// would wait again), a replacement that waits again, a bare or Job's pod.
func (c *Controller) sweep(ctx context.Context, now time.Time, stranded bool, reason string) error {
	counts := map[string]int{}
	var oldest time.Duration
	budget := max(1, int(c.o.HandbackQPS*c.o.Interval.Seconds()))
	var errs []error
	seen := sets.New[types.UID]()
	var waiting []*v1.Pod
	for _, obj := range c.pods.GetStore().List() {
		if p, ok := obj.(*v1.Pod); ok && Waiting(p, c.o.SchedulerName) {
			waiting = append(waiting, p)
		}
	}
	byOwner := waitingByOwner(waiting)
	for _, p := range waiting {
		seen.Insert(p.UID)
		class, detail := Classify(p)
		counts[class]++
		age := now.Sub(p.CreationTimestamp.Time)
		oldest = max(oldest, age)
		if !stranded {
			continue
		}
		ref := metav1.GetControllerOf(p)
		if class == OwnerRecreatable && c.owners.replacement(ref.UID, p.UID) {
			c.report(ctx, p, "replacement-waits", fmt.Sprintf("its %s's pod was handed back in this outage and this replacement waits for %s again (admission still hands its pods over: is the switch or the webhook's verdict stuck?); not deleted again", ref.Kind, c.o.SchedulerName), age, reason)
			continue
		}
		if age < c.o.HandbackAfter {
			continue
		}
		if class == OwnerRecreatable && !HandedOver(p, c.o.SchedulerName) {
			c.report(ctx, p, "not-handed-over", NotHandedOverDetail(c.o.SchedulerName), age, reason)
			continue
		}
		if class != OwnerRecreatable {
			c.report(ctx, p, class, detail, age, reason)
			continue
		}
		// At most a sync's worth of deletions per sync, each after asking again: the leader may
		// be back (then nothing more is handed back), and the switch and the counts are brought
		// up to date between batches.
		if budget <= 0 {
			continue
		}
		if ok, _ := c.Judge.Leader(ctx); ok {
			stranded = false
			continue
		}
		budget--
		if err := c.handBack(ctx, p, ref, byOwner[ref.UID], age, reason); err != nil {
			handbackErrors.Inc()
			errs = append(errs, err)
		}
	}
	for _, class := range OwnerClasses {
		waitingPods.WithLabelValues(class).Set(float64(counts[class]))
	}
	oldestWaiting.WithLabelValues().Set(oldest.Seconds())
	c.mu.Lock()
	c.reported = c.reported.Intersection(seen)
	c.mu.Unlock()
	return errors.Join(errs...)
}

// report records, once per pod, a StrandedPod event on it, the log line and the metric.
func (c *Controller) report(ctx context.Context, p *v1.Pod, why, detail string, age time.Duration, reason string) {
	c.mu.Lock()
	first := !c.reported.Has(p.UID)
	c.reported.Insert(p.UID)
	c.mu.Unlock()
	if !first {
		return
	}
	strandedReported.WithLabelValues(why).Inc()
	c.recorder.Eventf(p, v1.EventTypeWarning, "StrandedPod",
		"Waited %s for %s, which has no healthy leader (%s); not handed back: %s", age.Round(time.Second), c.o.SchedulerName, reason, detail)
	klog.FromContext(ctx).Info("Stranded pod reported, not handed back", "pod", klog.KObj(p), "reason", why)
}

// handBack deletes p (as listed) so its controller recreates it through admission, which leaves
// new pods to the default scheduler while the hand-off is off; the event says no more than that.
func (c *Controller) handBack(ctx context.Context, p *v1.Pod, ref *metav1.OwnerReference, ownersPods []types.UID, age time.Duration, reason string) error {
	if err := c.limiter.Wait(ctx); err != nil {
		return err
	}
	deleted, err := deleteAsListed(ctx, c.cs, p)
	if err != nil {
		return fmt.Errorf("handing back %s: %w", klog.KObj(p), err)
	}
	if !deleted {
		return nil
	}
	c.owners.record(ref.UID, p.UID, ownersPods)
	handedBack.WithLabelValues(ref.Kind).Inc()
	owner := &v1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Namespace: p.Namespace}
	c.recorder.Eventf(owner, v1.EventTypeWarning, "HandedBack",
		"Deleted pending pod %s, which admission handed to %s and which waited %s while it has no healthy leader (%s), so the %s recreates it through admission (new pods keep the default scheduler while the hand-off is off); once per outage: a replacement that waits for %s again is reported, not deleted",
		p.Name, c.o.SchedulerName, age.Round(time.Second), reason, ref.Kind, c.o.SchedulerName)
	klog.FromContext(ctx).Info("Stranded pod handed back", "pod", klog.KObj(p), "owner", ref.Kind+"/"+ref.Name, "waited", age.Round(time.Second))
	return nil
}
