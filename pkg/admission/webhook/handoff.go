package webhook

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
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// Hand-off modes (--handoff).
const (
	// HandoffLeader hands pods to pool-scheduler only while its leader renews its Lease.
	HandoffLeader = "leader"
	// HandoffAlways hands pods over whether or not pool-scheduler runs.
	HandoffAlways = "always"
)

// HandoffLease is the Lease pool-scheduler's leader renews (the scheduler configuration's
// leaderElection) and how long a renewal counts: its leaseDuration, the time after which a
// standby replica takes the Lease over. A leader that renewed within it is healthy.
type HandoffLease struct {
	Lease    types.NamespacedName
	Duration time.Duration
}

// HandoffFromConfig returns the Lease that tells whether pool-scheduler runs, from the scheduler
// configuration document, for --handoff=mode; nil for HandoffAlways.
func HandoffFromConfig(data []byte, mode string) (*HandoffLease, error) {
	switch mode {
	case HandoffAlways:
		return nil, nil
	case HandoffLeader:
	default:
		return nil, fmt.Errorf("--handoff: %q is not %s or %s", mode, HandoffLeader, HandoffAlways)
	}
	cfg, err := profile.LoadConfiguration(data)
	if err != nil {
		return nil, err
	}
	lease, d, ok := profile.LeaderLease(cfg)
	if !ok {
		return nil, fmt.Errorf("--handoff=%s: the scheduler configuration elects no leader through a Lease (leaderElection.leaderElect false, or resourceLock not leases), so nothing tells whether pool-scheduler runs; turn leader election on, or use --handoff=%s", HandoffLeader, HandoffAlways)
	}
	return &HandoffLease{Lease: lease, Duration: d}, nil
}

var handoffMode = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "pool_scheduler_webhook_handoff",
	Help: "1 while the webhook hands pods to pool-scheduler (its leader renewed its Lease within the lease duration, or --handoff=always), 0 while it leaves them with the default scheduler (degraded).",
})

func init() {
	ctrlmetrics.Registry.MustRegister(handoffMode)
}

// leaseWatch watches the leader's Lease with an informer of its own, which the webhook server
// does not wait for: a Lease it may not read (RBAC naming another Lease) leaves the hand-off
// degraded with a reason, never the webhook down. A renewal counts from when this process saw
// it (as client-go's leader election times a lease), so the leader's clock does not matter.
type leaseWatch struct {
	lease    HandoffLease
	informer cache.SharedIndexInformer
	now      func() time.Time

	mu       sync.Mutex
	holder   string
	renew    *metav1.MicroTime // the RenewTime last seen
	observed time.Time         // local time it was first seen
}

func newLeaseWatch(cs kubernetes.Interface, h HandoffLease, now func() time.Time) (*leaseWatch, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(h.Lease.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", h.Lease.Name).String()
		}))
	w := &leaseWatch{lease: h, informer: factory.Coordination().V1().Leases().Informer(), now: now}
	_, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(any) { w.observe(nil) },
	})
	return w, err
}

func (w *leaseWatch) run(ctx context.Context) { w.informer.Run(ctx.Done()) }

func (w *leaseWatch) observe(obj any) {
	lease, _ := obj.(*coordinationv1.Lease)
	w.mu.Lock()
	defer w.mu.Unlock()
	if lease == nil {
		w.holder, w.renew = "", nil
		return
	}
	w.holder = ""
	if lease.Spec.HolderIdentity != nil {
		w.holder = *lease.Spec.HolderIdentity
	}
	if r := lease.Spec.RenewTime; r != nil && (w.renew == nil || !r.Equal(w.renew)) {
		w.renew, w.observed = r.DeepCopy(), w.now()
	}
}

// healthy: a holder renewed the Lease, and this process saw the last renewal within the lease
// duration.
func (w *leaseWatch) healthy(context.Context) (bool, string) {
	if !w.informer.HasSynced() {
		return false, fmt.Sprintf("the Lease %s is not read yet (the webhook's Role must allow get, list and watch on it)", w.lease.Lease)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.renew == nil && w.holder == "":
		return false, fmt.Sprintf("no Lease %s, or no holder: pool-scheduler does not run", w.lease.Lease)
	case w.holder == "":
		return false, "the Lease has no holder"
	case w.renew == nil:
		return false, "the Lease was never renewed"
	}
	if age := w.now().Sub(w.observed); age > w.lease.Duration {
		return false, fmt.Sprintf("the leader %s has not renewed the Lease for %s (lease duration %s)", w.holder, age.Round(time.Second), w.lease.Duration)
	}
	return true, ""
}

var apiserverSupported = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "pool_scheduler_webhook_apiserver_supported",
	Help: "1 while kube-apiserver's version is one this release line serves (its own minor or the next), 0 outside: pods are then not handed to pool-scheduler.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(apiserverSupported)
	apiserverSupported.Set(1)
}

// skewCheck holds whether kube-apiserver runs a version this line serves. A pool-scheduler of
// another line (after an unattended control-plane upgrade) runs outside the version-skew policy,
// so pods are not handed to it until a matching line runs.
type skewCheck struct {
	mu  sync.Mutex
	err error // nil: supported, or not read yet
}

// check reads the server's version; a failed read keeps the last verdict (a transient error must
// not stop the hand-off).
func (s *skewCheck) check(ctx context.Context, d discovery.ServerVersionInterface) {
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
	if err != nil {
		apiserverSupported.Set(0)
		if changed {
			logger.Error(err, "pool-scheduler's line does not serve this kube-apiserver: new pods keep the default scheduler", "line", version.KubernetesLine())
		}
		return
	}
	apiserverSupported.Set(1)
	if changed {
		logger.Info("kube-apiserver's version is served by this line again", "line", version.KubernetesLine(), "server", v.GitVersion)
	}
}

func (s *skewCheck) supported() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, s.err.Error()
	}
	return true, ""
}

// handoffCheck combines the version check with the leader check (nil: no leader check).
func handoffCheck(skew *skewCheck, leader func(context.Context) (bool, string)) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		if ok, why := skew.supported(); !ok {
			return false, why
		}
		if leader == nil {
			return true, ""
		}
		return leader(ctx)
	}
}

// handoffState is the hand-off verdict: asked per admission and every few seconds, so the mode
// metric and the log follow it even while no pod is created.
type handoffState struct {
	check func(context.Context) (bool, string)

	mu       sync.Mutex
	known    bool
	handOver bool
}

// evaluate asks check, sets pool_scheduler_webhook_handoff and logs each change of verdict.
func (s *handoffState) evaluate(ctx context.Context) bool {
	ok, why := s.check(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := !s.known || s.handOver != ok
	s.known, s.handOver = true, ok
	if ok {
		handoffMode.Set(1)
	} else {
		handoffMode.Set(0)
	}
	if changed {
		logger := klog.FromContext(ctx)
		if ok {
			logger.Info("Handing new pods to pool-scheduler")
		} else {
			logger.Info("Not handing new pods to pool-scheduler: they keep the default scheduler, with the system-node affinity", "reason", why)
		}
	}
	return ok
}
