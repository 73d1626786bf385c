package app

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper"
)

// newSpreadCommand returns `spread`: the deletion-cost keeper and the rebalancer (docs/spread.md).
func newSpreadCommand(kubeconfig *string) *cobra.Command {
	o := spreadkeeper.Options{}
	var (
		schedulerConfig, metricsAddr, metricsCertDir string
		metricsSecure, deletionCost                  bool
	)
	cmd := &cobra.Command{
		Use: "spread",
		Short: "Keep the pod-deletion-cost of the replicas DomainSpread spreads, so scale-downs keep the spread, " +
			"and optionally rebalance drifted workloads through the Eviction API (leader-elected Deployment)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if schedulerConfig == "" {
				return errors.New("--config: required (the scheduler's configuration file, whose DomainSpread args give the dimensions)")
			}
			data, err := os.ReadFile(schedulerConfig)
			if err != nil {
				return fmt.Errorf("--config: %w", err)
			}
			args, err := profile.LoadArgs(data, o.Keeper.SchedulerName)
			if err != nil {
				return fmt.Errorf("--config %s: %w", schedulerConfig, err)
			}
			o.Keeper.Spread = args.DomainSpread
			o.Keeper.Off = !deletionCost
			o.Rebalancer.MaxSkew = 1
			if args.DomainSpread.Mode == config.SpreadHard {
				o.Rebalancer.MaxSkew = int(args.DomainSpread.MaxSkew)
			}
			if err := o.Keeper.Validate(); err != nil {
				return fmt.Errorf("deletion cost: %w", err)
			}
			if o.Rebalance {
				system, err := pool.NewSystemPolicy(args.SystemPoolGuard)
				if err != nil {
					return fmt.Errorf("--config %s: SystemPoolGuard: %w", schedulerConfig, err)
				}
				o.Rebalancer.System = &system
				if err := o.Rebalancer.Validate(); err != nil {
					return fmt.Errorf("rebalance: %w", err)
				}
			}
			if !deletionCost && !o.Rebalance {
				return errors.New("--deletion-cost=false and --rebalance=false: nothing to do")
			}
			o.Metrics = metricsOptions(metricsAddr, metricsSecure, metricsCertDir)
			ctx, cfg, err := start(*kubeconfig, "spread", "schedulerName", o.Keeper.SchedulerName, "deletionCost", deletionCost,
				"rebalance", o.Rebalance, "rebalanceDryRun", o.Rebalancer.DryRun)
			if err != nil {
				return err
			}
			return spreadkeeper.Run(ctx, cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&schedulerConfig, "config", "", "the scheduler's KubeSchedulerConfiguration file (its ConfigMap mounted): DomainSpread's dimensions and mode there")
	f.StringVar(&o.Keeper.SchedulerName, "scheduler-name", "pool-scheduler", "the profile whose pods are kept")
	f.BoolVar(&deletionCost, "deletion-cost", true, "keep controller.kubernetes.io/pod-deletion-cost on the replicas of ReplicaSets and ReplicationControllers DomainSpread spreads")
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
	f.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader on the Lease --leader-elect-lease, so replicas can run side by side")
	f.StringVar(&o.LeaderElectLease, "leader-elect-lease", spreadkeeper.LeaseName, "name of the leader Lease; each release in a namespace needs its own (the chart: <scheduler name>-spread)")
	f.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", "", "namespace of the Lease; empty: the pod's namespace")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables")
	f.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the apiserver authenticates and authorizes (get on /metrics); false: plain HTTP, bind it to 127.0.0.1")
	f.StringVar(&metricsCertDir, "metrics-cert-dir", "", "directory with the metrics server's tls.crt and tls.key; empty: a self-signed certificate")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables")
	return cmd
}
