package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// leaseHandoff returns the Handler's hand-off check: reads the Lease from c (the manager's
// cache, which watches that one Lease).
func leaseHandoff(c client.Reader, h HandoffLease, now func() time.Time) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		var lease coordinationv1.Lease
		if err := c.Get(ctx, h.Lease, &lease); err != nil {
			if apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("no Lease %s: pool-scheduler has not run", h.Lease)
			}
			return false, fmt.Sprintf("reading the Lease %s: %v", h.Lease, err)
		}
		return profile.LeaderHealthy(&lease, h.Duration, now())
	}
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
