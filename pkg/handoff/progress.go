package handoff

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Reported by the hand-off controller's leader only, like its other verdict gauges.
	wedgedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff_leader_wedged",
		Help: "1 while pool-scheduler's leader renews its Lease but has bound or judged none of the pods handed to it within --progress-bound (treated as down: new pods keep the default scheduler, stranded ones are handed back), 0 otherwise. Reported by the hand-off controller's leader only.",
	}, nil)
	progressAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff_progress_age_seconds",
		Help: "Seconds since the hand-off controller last saw pool-scheduler bind a pod or judge one Unschedulable (or since its own start, a new leader or a probe, if later). Grows while no pod is handed over: read it with pool_scheduler_handoff_leader_wedged. Reported by the hand-off controller's leader only.",
	}, nil)
)

func init() {
	ctrlmetrics.Registry.MustRegister(wedgedGauge, progressAge)
}

// controllerProgress is the hand-off controller's progress check (nil with ProgressBound 0).
func controllerProgress(cs kubernetes.Interface, o Options, now func() time.Time) (*Progress, error) {
	if o.ProgressBound <= 0 {
		return nil, nil
	}
	p, err := NewProgress(cs, o.SchedulerName, o.ProgressBound, now)
	if err != nil {
		return nil, err
	}
	p.WedgedGauge, p.AgeGauge = wedgedGauge.WithLabelValues(), progressAge.WithLabelValues()
	return p, nil
}

// DefaultProgressBound is --progress-bound's default: how long pool-scheduler's leader may leave
// every pod handed to it undecided before it counts as down. Tens of seconds, like the Lease's
// expiry: a healthy scheduler decides on a pod within a second, and a busy one binds some pod of
// its backlog every few seconds.
const DefaultProgressBound = 30 * time.Second

// reprobeFactor: a wedged verdict with no pod left to show the wedge (all handed back) holds for
// this many progress bounds, then pods are handed over again as a probe. Without it a leader
// whose binding path came back would never be given a pod again until it restarts.
const reprobeFactor = 10

// ValidateProgressBound names the flag at fault; 0 turns the progress check off.
func ValidateProgressBound(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--progress-bound: must be 0 (off) or positive, got %s", d)
	}
	return nil
}

// Progress judges whether pool-scheduler's leader schedules: a leader that renews its Lease but
// binds nothing (informers wedged, a plugin stuck, its bindings failing or throttled) is down.
//
// Definition: the leader is wedged when some pod handed to it (its schedulerName, pending,
// unbound, not terminating, not held by spec.schedulingGates, not judged Unschedulable) has
// waited undecided longer than the bound, and no progress was seen within the bound. Progress
// is a bind (the pod's spec.nodeName set) or an Unschedulable verdict (PodScheduled=False,
// reason Unschedulable: the scheduler ran the pod's cycle); a SchedulerError or a failed bind
// is not. A busy leader binding part of a large backlog keeps progressing, so it stays healthy.
//
// Hysteresis: once wedged, the verdict holds until progress is seen, the Lease changes holder
// (a new leader, or the Lease healthy again after an outage: each gets a fresh bound), or, with
// no undecided pod left waiting, reprobeFactor bounds pass. Ages count on this process's clock
// from when it saw a pod start waiting, never from the pod's creationTimestamp.
type Progress struct {
	// WedgedGauge, when set, is 1 while wedged, 0 otherwise; AgeGauge the seconds since the last
	// progress (or since the last fresh start: this process's start, a new leader, a probe).
	WedgedGauge prometheus.Gauge
	AgeGauge    prometheus.Gauge

	informer cache.SharedIndexInformer
	state    *progressState
	now      func() time.Time
	reg      cache.ResourceEventHandlerRegistration
}

// NewProgress watches the pending pods that name schedulerName (an informer holding only what
// the verdict reads); bound > 0.
func NewProgress(cs kubernetes.Interface, schedulerName string, bound time.Duration, now func() time.Time) (*Progress, error) {
	// Pending pods only (bound ones too, until their kubelet runs them): a bind is then an
	// update (spec.nodeName set). A filter on spec.nodeName="" would show it as a delete, which
	// carries the pod as it was before the bind, like a deletion does.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.AndSelectors(
				fields.OneTermEqualSelector("spec.schedulerName", schedulerName),
				fields.OneTermEqualSelector("status.phase", string(v1.PodPending))).String()
		}),
		informers.WithTransform(trimPod))
	p := &Progress{
		informer: factory.Core().V1().Pods().Informer(),
		state:    newProgressState(schedulerName, bound, now()),
		now:      now,
	}
	reg, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				p.state.add(pod, p.now())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*v1.Pod)
			newPod, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 {
				p.state.update(oldPod, newPod, p.now())
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				p.state.remove(pod.UID)
			}
		},
	})
	p.reg = reg
	return p, err
}

// Run watches until ctx ends.
func (p *Progress) Run(ctx context.Context) { p.informer.Run(ctx.Done()) }

// HasSynced reports whether the pods were read once.
func (p *Progress) HasSynced() bool { return p.reg != nil && p.reg.HasSynced() }

// Leader is lease's verdict and, while the Lease is healthy, the progress verdict: the Leader of
// a Judge. A new holder, or the Lease healthy again, gives the leader a fresh bound.
func (p *Progress) Leader(lease *LeaseWatch) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		ok, why := lease.Healthy(ctx)
		now := p.now()
		p.state.lease(ok, lease.Holder(), now)
		if !ok {
			p.setGauges(false, now)
			return false, why
		}
		if !p.HasSynced() {
			// No wedge can be shown yet; a process that cannot read pods at all (RBAC) is
			// degraded once it has had a bound to.
			if now.Sub(p.state.started) <= p.state.bound {
				return true, ""
			}
			p.setGauges(false, now)
			return false, "the pods waiting for pool-scheduler are not read yet (get, list and watch on pods are needed to tell whether its leader schedules)"
		}
		wedged, why, changed := p.state.check(now)
		p.setGauges(wedged, now)
		if changed {
			if wedged {
				klog.FromContext(ctx).Info("pool-scheduler's leader renews its Lease but schedules nothing: treated as down", "reason", why)
			} else {
				klog.FromContext(ctx).Info("pool-scheduler's leader is judged to schedule again (progress seen, a new leader, or a probe)")
			}
		}
		return !wedged, why
	}
}

func (p *Progress) setGauges(wedged bool, now time.Time) {
	if p.WedgedGauge != nil {
		setGauge(p.WedgedGauge, wedged)
	}
	if p.AgeGauge != nil {
		p.AgeGauge.Set(p.state.progressAge(now).Seconds())
	}
}

// Holder is the Lease's holder as last seen ("" for none).
func (w *LeaseWatch) Holder() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rec.holder
}

// progressState is Progress's bookkeeping, driven by pod events and a clock (tests drive it).
type progressState struct {
	schedulerName string
	bound         time.Duration
	started       time.Time

	mu        sync.Mutex
	fresh     time.Time               // the last fresh start: ages count from here at the earliest
	progress  time.Time               // the last bind or Unschedulable verdict seen
	undecided map[types.UID]time.Time // pods waiting undecided, since when (local clock)
	wedged    bool
	evidence  time.Time // while wedged: when an overdue undecided pod was last seen
	holder    string
	leaseOK   bool
}

func newProgressState(schedulerName string, bound time.Duration, now time.Time) *progressState {
	return &progressState{schedulerName: schedulerName, bound: bound, started: now, fresh: now, undecided: map[types.UID]time.Time{}}
}

// undecided reports whether p waits for a decision of the scheduler: handed to it and waiting,
// not gated (the scheduler does not look at a gated pod), not already judged Unschedulable.
func (s *progressState) isUndecided(p *v1.Pod) bool {
	return Waiting(p, s.schedulerName) && len(p.Spec.SchedulingGates) == 0 && unschedulable(p) == nil
}

// unschedulable returns p's Unschedulable verdict, if any.
func unschedulable(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

func (s *progressState) add(p *v1.Pod, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.track(p, now)
}

func (s *progressState) track(p *v1.Pod, now time.Time) {
	if !s.isUndecided(p) {
		delete(s.undecided, p.UID)
		return
	}
	if _, ok := s.undecided[p.UID]; !ok {
		s.undecided[p.UID] = now
	}
}

func (s *progressState) update(oldPod, newPod *v1.Pod, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bound := oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != ""
	verdict := unschedulable(newPod)
	judged := verdict != nil && !conditionEqual(verdict, unschedulable(oldPod))
	if bound || judged {
		s.progress = now
	}
	s.track(newPod, now)
}

func conditionEqual(a, b *v1.PodCondition) bool {
	return b != nil && a.Message == b.Message && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

func (s *progressState) remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.undecided, uid)
}

// lease records the Lease's verdict and holder: a new holder, or a healthy Lease after an
// unhealthy one, starts afresh.
func (s *progressState) lease(ok bool, holder string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok && (!s.leaseOK || holder != s.holder) {
		s.restart(now)
	}
	s.leaseOK, s.holder = ok, holder
}

func (s *progressState) restart(now time.Time) {
	s.fresh, s.wedged, s.evidence = now, false, time.Time{}
}

func (s *progressState) progressAge(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(laterOf(s.progress, s.fresh))
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// check returns whether the leader is wedged, why, and whether that verdict changed.
func (s *progressState) check(now time.Time) (wedged bool, why string, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.wedged
	defer func() { changed = s.wedged != was }()
	since := laterOf(s.progress, s.fresh)
	if now.Sub(since) <= s.bound {
		s.wedged = false
		return false, "", false
	}
	var oldest time.Time
	for _, t := range s.undecided {
		t = laterOf(t, s.fresh)
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if !oldest.IsZero() && now.Sub(oldest) > s.bound {
		s.wedged, s.evidence = true, now
		return true, fmt.Sprintf("pool-scheduler's leader %s renews its Lease but has bound or judged no pod for %s while %d pods wait undecided for it, the oldest for %s (progress bound %s)",
			s.holder, now.Sub(since).Round(time.Second), len(s.undecided), now.Sub(oldest).Round(time.Second), s.bound), false
	}
	if s.wedged && now.Sub(s.evidence) < reprobeFactor*s.bound {
		return true, fmt.Sprintf("pool-scheduler's leader %s renews its Lease but has bound or judged no pod for %s; no pod is left waiting to show it, so pods are handed over again in %s as a probe",
			s.holder, now.Sub(since).Round(time.Second), (reprobeFactor*s.bound - now.Sub(s.evidence)).Round(time.Second)), false
	}
	if s.wedged {
		// The probe: a fresh bound for whatever is handed over next.
		s.restart(now)
	}
	return false, "", false
}

// trimPod keeps what the verdict reads (and what Waiting reads), so the cache stays small
// whatever the pods carry.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec:   v1.PodSpec{SchedulerName: p.Spec.SchedulerName, NodeName: p.Spec.NodeName, SchedulingGates: p.Spec.SchedulingGates},
		Status: v1.PodStatus{Phase: p.Status.Phase},
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	return out, nil
}
