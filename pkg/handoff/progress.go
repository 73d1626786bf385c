package handoff

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		Help: "1 while pool-scheduler's leader renews its Lease but its heartbeat shows it wedged: pods wait in its queue and its scheduling loop finishes no attempt, or its pod or node watch stays behind, for longer than --progress-bound (treated as down: new pods keep the default scheduler, stranded ones are handed back), 0 otherwise. Reported by the hand-off controller's leader only.",
	}, nil)
	progressAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_handoff_progress_age_seconds",
		Help: "Seconds since pool-scheduler's leader's heartbeat last showed its loop finishing an attempt or its queue empty (or since the hand-off controller's start, a new leader, or the Lease healthy again, if later). Reported by the hand-off controller's leader only.",
	}, nil)
)

func init() {
	ctrlmetrics.Registry.MustRegister(wedgedGauge, progressAge)
}

// DefaultProgressBound is --progress-bound's default: how long pool-scheduler's leader may show
// no progress in its heartbeat (pods waiting in its queue, no attempt finished; a watch behind)
// before it counts as down. Tens of seconds, like the Lease's expiry: a healthy scheduler
// finishes an attempt within a second, and its watches deliver a change within a second.
const DefaultProgressBound = 30 * time.Second

// ValidateProgressBound names the flag at fault; 0 turns the progress check off.
func ValidateProgressBound(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--progress-bound: must be 0 (off) or positive, got %s", d)
	}
	return nil
}

// Progress judges whether pool-scheduler's leader schedules, from the heartbeat it publishes on
// its Lease (pkg/heartbeat; loopState has the rule): a leader that renews its Lease but whose
// loop is stuck, or whose pod or node watch has stalled, is down. The pods it reads are the
// hand-off controller's (those waiting for pool-scheduler), for their resource versions only;
// the nodes through an informer of its own that keeps names and resource versions.
type Progress struct {
	// WedgedGauge, when set, is 1 while wedged, 0 otherwise; AgeGauge the seconds since the
	// heartbeat last showed progress (or since the last fresh start).
	WedgedGauge prometheus.Gauge
	AgeGauge    prometheus.Gauge

	state   *loopState
	nodes   cache.SharedIndexInformer
	now     func() time.Time
	regs    []cache.ResourceEventHandlerRegistration
	leaseOK bool
	verdict string
}

// NewProgress reads the heartbeat on lease's Lease, the resource versions of pods (an informer
// the caller runs) and of every node; bound > 0.
func NewProgress(cs kubernetes.Interface, lease *LeaseWatch, pods cache.SharedIndexInformer, bound time.Duration, now func() time.Time) (*Progress, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(trimToVersion))
	p := &Progress{state: newLoopState(bound, now()), nodes: factory.Core().V1().Nodes().Informer(), now: now}
	leaseSeen := func(obj any) {
		l, _ := obj.(*coordinationv1.Lease)
		p.state.lease(l, p.now())
	}
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		seen     func(any)
	}{
		{lease.informer, leaseSeen},
		{pods, func(obj any) { p.state.seenPod(obj, p.now()) }},
		{p.nodes, func(obj any) { p.state.seenNode(obj, p.now()) }},
	} {
		seen := h.seen
		reg, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { seen(obj) },
			UpdateFunc: func(_, obj any) { seen(obj) },
			DeleteFunc: func(obj any) {
				if _, ok := obj.(cache.DeletedFinalStateUnknown); !ok {
					seen(obj)
				}
			},
		})
		if err != nil {
			return nil, err
		}
		p.regs = append(p.regs, reg)
	}
	return p, nil
}

// Run watches the nodes until ctx ends (the Lease and the pods are their owners' to run).
func (p *Progress) Run(ctx context.Context) { p.nodes.Run(ctx.Done()) }

// HasSynced reports whether the Lease, the pods and the nodes were read once.
func (p *Progress) HasSynced() bool {
	for _, r := range p.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return len(p.regs) > 0
}

// Leader is lease's verdict and, while the Lease is healthy, the heartbeat's: the Leader of a
// Judge. The Lease healthy again gives the leader a fresh bound, as a new holder does.
func (p *Progress) Leader(lease *LeaseWatch) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		ok, why := lease.Healthy(ctx)
		now := p.now()
		if ok && !p.leaseOK {
			p.state.healthyAgain(now)
		}
		p.leaseOK = ok
		if !ok {
			p.setGauges(false, 0)
			return false, why
		}
		if !p.HasSynced() {
			// No wedge can be shown yet; a process that cannot read nodes at all (RBAC) is
			// degraded once it has had a bound to.
			if now.Sub(p.state.started) <= p.state.bound {
				return true, ""
			}
			p.setGauges(false, 0)
			return false, "the nodes are not read yet (list and watch on nodes are needed to tell whether pool-scheduler's leader schedules)"
		}
		why, age := p.state.check(now)
		p.setGauges(why != "", age)
		if (why != "") != (p.verdict != "") {
			if why != "" {
				klog.FromContext(ctx).Info("pool-scheduler's leader renews its Lease but its heartbeat shows it wedged: treated as down", "reason", why)
			} else {
				klog.FromContext(ctx).Info("pool-scheduler's leader is judged to schedule again (its loop finished an attempt, its watches caught up, or a new leader)")
			}
		}
		p.verdict = why
		return why == "", why
	}
}

func (p *Progress) setGauges(wedged bool, age time.Duration) {
	if p.WedgedGauge != nil {
		setGauge(p.WedgedGauge, wedged)
	}
	if p.AgeGauge != nil {
		p.AgeGauge.Set(age.Seconds())
	}
}

// Holder is the Lease's holder as last seen ("" for none).
func (w *LeaseWatch) Holder() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rec.holder
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// trimToVersion keeps a node's name and resource version: all the heartbeat check reads.
func trimToVersion(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}, nil
}
