// Package handoff decides whether new pods are handed to pool-scheduler (its leader renews its
// Lease, and kube-apiserver runs a version its line serves) and hands back the pods stranded
// while it does not run. The webhook, the hand-off controller (the MutatingAdmissionPolicy's
// switch and the recovery of stranded pods) and poolctl share it, so both ways in judge alike.
package handoff

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// Hand-off modes (--handoff).
const (
	// ModeLeader hands pods to pool-scheduler only while its leader renews its Lease.
	ModeLeader = "leader"
	// ModeAlways hands pods over whether or not pool-scheduler runs.
	ModeAlways = "always"
)

// Lease is the Lease pool-scheduler's leader renews (the scheduler configuration's
// leaderElection) and how long a renewal counts: its leaseDuration, the time after which a
// standby replica takes the Lease over. A leader that renewed within it is healthy.
type Lease struct {
	Lease    types.NamespacedName
	Duration time.Duration
}

// LeaseFromConfig returns the Lease that tells whether pool-scheduler runs, from the scheduler
// configuration document, for --handoff=mode; nil for ModeAlways.
func LeaseFromConfig(data []byte, mode string) (*Lease, error) {
	cfg, err := profile.LoadConfiguration(data)
	if err != nil {
		return nil, err
	}
	return LeaseFromConfiguration(cfg, mode)
}

// LeaseFromConfiguration is LeaseFromConfig for a decoded configuration.
func LeaseFromConfiguration(cfg *schedconfig.KubeSchedulerConfiguration, mode string) (*Lease, error) {
	switch mode {
	case ModeAlways:
		return nil, nil
	case ModeLeader:
	default:
		return nil, fmt.Errorf("--handoff: %q is not %s or %s", mode, ModeLeader, ModeAlways)
	}
	lease, d, ok := LeaderLease(cfg)
	if !ok {
		return nil, fmt.Errorf("--handoff=%s: the scheduler configuration elects no leader through a Lease (leaderElection.leaderElect false, or resourceLock not leases), so nothing tells whether pool-scheduler runs; turn leader election on, or use --handoff=%s", ModeLeader, ModeAlways)
	}
	return &Lease{Lease: lease, Duration: d}, nil
}

// LeaseWatch watches the leader's Lease with an informer of its own, which the webhook server
// does not wait for: a Lease it may not read (RBAC naming another Lease) leaves the hand-off
// degraded with a reason, never the webhook down. A renewal counts from when this process saw
// it (as client-go's leader election times a lease), so the leader's clock does not matter; a
// Lease found held at start counts from then only when its renewTime is near this clock.
type LeaseWatch struct {
	lease    Lease
	informer cache.SharedIndexInformer
	now      func() time.Time

	mu  sync.Mutex
	rec leaseRecord
	reg cache.ResourceEventHandlerRegistration
}

// NewLeaseWatch watches h's Lease; now is the local clock (time.Now).
func NewLeaseWatch(cs kubernetes.Interface, h Lease, now func() time.Time) (*LeaseWatch, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(h.Lease.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", h.Lease.Name).String()
		}))
	w := &LeaseWatch{lease: h, informer: factory.Coordination().V1().Leases().Informer(), now: now}
	reg, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// The initial list's Lease says nothing of whether its leader still runs (it may have
		// died an hour ago); one created or renewed later does.
		AddFunc:    func(obj any) { w.observe(obj, !w.registered()) },
		UpdateFunc: func(_, obj any) { w.observe(obj, false) },
		DeleteFunc: func(any) { w.observe(nil, false) },
	})
	w.reg = reg
	return w, err
}

func (w *LeaseWatch) registered() bool {
	return w.reg != nil && w.reg.HasSynced()
}

// Run watches until ctx ends.
func (w *LeaseWatch) Run(ctx context.Context) { w.informer.Run(ctx.Done()) }

// HasSynced reports whether the Lease was read once.
func (w *LeaseWatch) HasSynced() bool { return w.informer.HasSynced() }

func (w *LeaseWatch) observe(obj any, initial bool) {
	lease, _ := obj.(*coordinationv1.Lease)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rec.see(lease, initial, w.lease.Duration, w.now())
}

// Healthy: this process saw the Lease renewed (or released by its leader) within the lease
// duration (leaseRecord.health).
func (w *LeaseWatch) Healthy(context.Context) (bool, string) {
	if !w.informer.HasSynced() {
		return false, fmt.Sprintf("the Lease %s is not read yet (the webhook's Role must allow get, list and watch on it)", w.lease.Lease)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rec.health(w.lease.Lease, w.lease.Duration, w.now())
}

// SkewCheck holds whether kube-apiserver runs a version this line serves. A pool-scheduler of
// another line (after an unattended control-plane upgrade) runs outside the version-skew policy,
// so pods are not handed to it until a matching line runs.
type SkewCheck struct {
	// Gauge, when set, is 1 while supported and 0 outside.
	Gauge prometheus.Gauge

	mu  sync.Mutex
	err error // nil: supported, or not read yet
}

// Check reads the server's version; a failed read keeps the last verdict (a transient error must
// not stop the hand-off).
func (s *SkewCheck) Check(ctx context.Context, d discovery.ServerVersionInterface) {
	logger := klog.FromContext(ctx)
	v, err := d.ServerVersion()
	if err != nil {
		logger.Error(err, "Cannot read kube-apiserver's version; keeping the last verdict")
		return
	}
	err = version.ServesServer(v.Major, v.Minor)
	s.mu.Lock()
	changed := (err == nil) != (s.err == nil)
	s.err = err
	s.mu.Unlock()
	s.setGauge(err == nil)
	if err != nil {
		if changed {
			logger.Error(err, "pool-scheduler's line does not serve this kube-apiserver: new pods keep the default scheduler", "line", version.KubernetesLine())
		}
		return
	}
	if changed {
		logger.Info("kube-apiserver's version is served by this line again", "line", version.KubernetesLine(), "server", v.GitVersion)
	}
}

func (s *SkewCheck) setGauge(ok bool) {
	if s.Gauge == nil {
		return
	}
	if ok {
		s.Gauge.Set(1)
	} else {
		s.Gauge.Set(0)
	}
}

// Supported reports whether the server's version is served (true until read), and if not, why.
func (s *SkewCheck) Supported() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, s.err.Error()
	}
	return true, ""
}

// Judge is the hand-off verdict: pods are handed to pool-scheduler while kube-apiserver's
// version is served (Skew) and, unless Leader is nil, its leader is healthy. Asked per
// admission and every few seconds, so the mode metric and the log follow it even while no pod
// is created.
type Judge struct {
	Skew   *SkewCheck
	Leader func(context.Context) (bool, string)
	// Gauge, when set, is 1 while pods are handed over and 0 while degraded.
	Gauge prometheus.Gauge

	mu       sync.Mutex
	known    bool
	handOver bool
}

func (j *Judge) check(ctx context.Context) (bool, string) {
	if j.Skew != nil {
		if ok, why := j.Skew.Supported(); !ok {
			return false, why
		}
	}
	if j.Leader == nil {
		return true, ""
	}
	return j.Leader(ctx)
}

// Evaluate asks for the verdict (and why, when degraded), sets the gauge and logs each change
// of verdict.
func (j *Judge) Evaluate(ctx context.Context) (bool, string) {
	ok, why := j.check(ctx)
	j.mu.Lock()
	defer j.mu.Unlock()
	changed := !j.known || j.handOver != ok
	j.known, j.handOver = true, ok
	if j.Gauge != nil {
		if ok {
			j.Gauge.Set(1)
		} else {
			j.Gauge.Set(0)
		}
	}
	if changed {
		logger := klog.FromContext(ctx)
		if ok {
			logger.Info("Handing new pods to pool-scheduler")
		} else {
			logger.Info("Not handing new pods to pool-scheduler: they keep the default scheduler, with the constraints the default scheduler can enforce", "reason", why)
		}
	}
	return ok, why
}
