package spreadkeeper

import (
	"cmp"
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure `pool-labeler spread`: the deletion-cost keeper and the rebalancer.
type Options struct {
	Keeper KeeperOptions
	// Rebalance turns the rebalancer on (off by default); RebalanceOptions tune it.
	Rebalance  bool
	Rebalancer RebalanceOptions

	Metrics              metricsserver.Options
	ProbeAddr            string
	LeaderElect          bool
	LeaderElectNamespace string
	// LeaderElectLease names the Lease; empty: LeaseName.
	LeaderElectLease string
}

// LeaseName is the spread mode's default leader Lease (the chart names its own per release,
// <scheduler name>-spread: two releases in one namespace must not share it).
const LeaseName = "pool-scheduler-spread"

// Run runs the leader's keeper (and rebalancer) until ctx ends; standbys wait on the Lease.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                       o.Metrics,
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              cmp.Or(o.LeaderElectLease, LeaseName),
		LeaderElectionNamespace:       o.LeaderElectNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	k, err := NewKeeper(cs, mgr.GetEventRecorderFor(LeaseName), o.Keeper)
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(k.Run)); err != nil {
		return err
	}
	if o.Rebalance {
		r, err := NewRebalancer(k, o.Rebalancer)
		if err != nil {
			return err
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { r.Run(ctx); return nil })); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
