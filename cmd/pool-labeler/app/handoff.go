package app

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
)

var handoffMode = mode{
	name: "handoff",
	short: "Judge whether pool-scheduler runs (its leader's Lease, the API server's version), set the switch the MutatingAdmissionPolicy reads, " +
		"and hand back pods stranded while it does not run (leader-elected Deployment)",
	config:          "the scheduler's KubeSchedulerConfiguration file (its ConfigMap mounted): its leaderElection names the Lease whose renewals say pool-scheduler runs",
	configRequired:  true,
	schedulerName:   "the profile of --config whose waiting pods are watched and handed back",
	serve:           &serving{},
	lease:           handoff.LeaseName,
	leaseHelp:       "; each release in a namespace needs its own (the chart: <scheduler name>-handoff)",
	releaseOnCancel: true,
	flags:           handoffFlags,
}

func handoffFlags(f *pflag.FlagSet, s *shared) runner {
	o := handoff.Options{}
	f.StringVar(&o.Switch.Name, "switch-configmap", handoff.SwitchConfigMap, "the ConfigMap the MutatingAdmissionPolicy reads as its parameter (data.handoff \"true\" or \"false\"); empty: none written (webhook installs)")
	f.StringVar(&o.Switch.Namespace, "switch-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --switch-configmap")
	f.BoolVar(&o.Handback, "handback", true, "delete pods that waited for pool-scheduler longer than --handback-after while it had no healthy leader, when a ReplicaSet, StatefulSet or ReplicationController recreates them (for the default scheduler); others are reported with an event")
	f.DurationVar(&o.HandbackAfter, "handback-after", 2*time.Minute, "how long pool-scheduler must have had no healthy leader, and a pod must have waited, before the pod is handed back")
	f.Float64Var(&o.HandbackQPS, "handback-rate", 5, "pod deletions per second at most")
	f.DurationVar(&o.Interval, "sync-interval", 5*time.Second, "how often the verdict, the switch and the waiting pods are brought up to date")
	f.DurationVar(&o.ProgressBound, "progress-bound", handoff.DefaultProgressBound, "a leader that renews its Lease but whose heartbeat shows pods waiting in its queue and no scheduling attempt finished for this long, or a pod or node change not reached by its informers within it, is treated as down (docs/operations.md); 0: the Lease alone")
	return runner{
		complete: func(*cobra.Command) ([]any, error) {
			o.Profile = s.profile
			if err := o.Complete(); err != nil {
				return nil, err
			}
			return []any{"lease", o.Lease.Lease.String(), "schedulerName", o.SchedulerName, "switch", o.Switch.String(), "handback", o.Handback, "handbackAfter", o.HandbackAfter}, nil
		},
		setup: func(_ context.Context, mgr ctrl.Manager) error { return handoff.SetupWithManager(mgr, o) },
	}
}

// handbackMode is no manager: the chart's pre-delete hook, a Job that ends (poolctl handback
// for kustomize users does the hand-back part).
var handbackMode = mode{
	name: "handback",
	short: "Before pool-scheduler is removed: delete the admission path, then hand back every pod waiting for it that a controller recreates, " +
		"until none has appeared for --settle; with --budget-floor-binding, also remove the budget floor's budgets (Job run once, e.g. Helm's pre-delete hook)",
	schedulerName: "the schedulerName whose waiting pods are handed back",
	flags:         handbackFlags,
}

func handbackFlags(f *pflag.FlagSet, s *shared) runner {
	o := handoff.UninstallOptions{}
	f.StringSliceVar(&o.WebhookConfigurations, "webhook-configuration", nil, "MutatingWebhookConfigurations to delete first (the webhook way in)")
	f.StringSliceVar(&o.PolicyBindings, "policy-binding", nil, "MutatingAdmissionPolicyBindings to delete first (the policy way in)")
	f.DurationVar(&o.Settle, "settle", 10*time.Second, "hand back until no recreatable pod has appeared for this long")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up (exit 1) after this long")
	f.Float64Var(&o.QPS, "rate", 5, "pod deletions per second at most")
	var floorBinding string
	f.StringVar(&floorBinding, "budget-floor-binding", "", "also remove the budget floor (pool-labeler spread --budget-floor): delete this ClusterRoleBinding, which grants its writes, then every PodDisruptionBudget it keeps, until none has appeared for --settle; empty: the floor's budgets are left")
	return runner{
		complete: func(*cobra.Command) ([]any, error) {
			o.SchedulerName = s.schedulerName
			return []any{"schedulerName", o.SchedulerName, "webhookConfigurations", o.WebhookConfigurations, "policyBindings", o.PolicyBindings, "budgetFloorBinding", floorBinding}, o.Complete()
		},
		run: func(ctx context.Context, cfg *rest.Config) error {
			if floorBinding == "" {
				return handoff.RunUninstall(ctx, cfg, o)
			}
			// Side by side, under the one --timeout: the hook's bound (the chart's Job) holds.
			ctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			var floorErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Its own client, so the budgets' deletions do not queue behind the pods'
				// (--kube-api-qps, 50/s by default: 1000 budgets in 20 s; the cluster keeps
				// no more than one per workload).
				cs, err := kubernetes.NewForConfig(cfg)
				if err == nil {
					_, err = floor.Remove(ctx, cs, floorBinding, o.Settle)
				}
				floorErr = err
			}()
			err := handoff.RunUninstall(ctx, cfg, o)
			<-done
			return errors.Join(err, floorErr)
		},
	}
}
