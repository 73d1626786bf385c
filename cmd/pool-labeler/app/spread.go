package app

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
)

// spreadMode: the deletion-cost keeper and the rebalancer (docs/spread.md).
var spreadMode = mode{
	name: "spread",
	short: "Keep the pod-deletion-cost of the replicas DomainSpread spreads, so scale-downs keep the spread, " +
		"and optionally rebalance drifted workloads through the Eviction API (leader-elected Deployment)",
	config:          "the scheduler's KubeSchedulerConfiguration file (its ConfigMap mounted): DomainSpread's dimensions and mode there",
	configRequired:  true,
	schedulerName:   "the profile of --config whose pods are kept",
	serve:           &serving{},
	lease:           spreadkeeper.LeaseName,
	leaseHelp:       "; each release in a namespace needs its own (the chart: <scheduler name>-spread)",
	releaseOnCancel: true,
	flags:           spreadFlags,
}

func spreadFlags(f *pflag.FlagSet, s *shared) runner {
	o := spreadkeeper.Options{}
	f.BoolVar(&o.DeletionCost, "deletion-cost", true, "keep controller.kubernetes.io/pod-deletion-cost on the replicas of ReplicaSets and ReplicationControllers DomainSpread spreads")
	f.Float64Var(&o.Keeper.QPS, "deletion-cost-rate", 20, "pod patches per second at most")
	f.IntVar(&o.Keeper.Burst, "deletion-cost-burst", 40, "pod patches in a burst at most")
	f.DurationVar(&o.Keeper.Settle, "settle", time.Second, "how long a workload's pod changes are gathered before its costs are computed again")
	f.IntVar(&o.Keeper.Workers, "workers", 2, "workloads computed in parallel")
	f.BoolVar(&o.Rebalance, "rebalance", false, "evict, one replica at a time per workload and through the Eviction API (PodDisruptionBudgets hold), replicas of workloads whose spread exceeds DomainSpread's skew")
	f.BoolVar(&o.Rebalancer.DryRun, "rebalance-dry-run", true, "with --rebalance: only report (log, WouldRebalance event, metric) what would be evicted")
	f.DurationVar(&o.Rebalancer.Interval, "rebalance-interval", time.Minute, "time between rebalancing passes")
	f.DurationVar(&o.Rebalancer.Cooldown, "rebalance-cooldown", 5*time.Minute, "a workload is left alone this long after one of its replicas was evicted (and until all are Ready again)")
	f.DurationVar(&o.Rebalancer.MaxBackoff, "rebalance-max-backoff", time.Hour, "a workload the rebalancer could not help (no fit, protected replicas, skew not lowered) is left alone for the cooldown, doubled at each failure in a row up to this")
	f.IntVar(&o.Rebalancer.MaxPerPass, "rebalance-max-per-pass", 5, "evictions per pass at most, in all")
	f.IntVar(&o.Rebalancer.MaxPerNode, "rebalance-max-per-node", 1, "evictions per pass at most off one node")
	f.IntVar(&o.Rebalancer.MaxPerNamespace, "rebalance-max-per-namespace", 2, "evictions per pass at most in one namespace")
	f.BoolVar(&o.BudgetFloor, "budget-floor", false, "keep a PodDisruptionBudget (minAvailable ceil(2r/3)) for each Deployment and StatefulSet of 3 or more replicas without one, in namespaces labelled "+floor.NamespaceLabel+"=true (docs/maintenance.md)")
	f.StringVar(&o.HandoffSwitch.Name, "handoff-switch-configmap", "", "with --rebalance: the hand-off controller's switch (its --switch-configmap); the rebalancer evicts nothing while it does not say handoff \"true\" (pool-scheduler degraded), or cannot be read; empty: not read")
	f.StringVar(&o.HandoffSwitch.Namespace, "handoff-switch-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --handoff-switch-configmap")
	return runner{
		complete: func(*cobra.Command) ([]any, error) {
			o.Profile = s.profile
			if err := o.Complete(); err != nil {
				return nil, err
			}
			return []any{"schedulerName", o.Keeper.SchedulerName, "deletionCost", o.DeletionCost, "rebalance", o.Rebalance, "rebalanceDryRun", o.Rebalancer.DryRun, "budgetFloor", o.BudgetFloor,
				"handoffSwitch", o.HandoffSwitch.String()}, nil
		},
		managerOptions: func(opts *ctrl.Options) error {
			if o.BudgetFloor {
				floor.CacheOptions(opts)
			}
			return nil
		},
		setup: func(_ context.Context, mgr ctrl.Manager) error { return spreadkeeper.SetupWithManager(mgr, o) },
	}
}
