package app

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

var controllerMode = mode{
	name:  "controller",
	short: "Reconcile every node towards its pool's NodePoolLabelSet (leader-elected Deployment)",
	config: "the scheduler's KubeSchedulerConfiguration file (its ConfigMap mounted): NodePoolReady's args there give the pool label keys, " +
		"the rule the status judges nodes by, and the NodePoolLabelSet namespaces (labelSetNamespaces); empty: the plugin's defaults and --pool-label-keys",
	configAlias:   "scheduler-config",
	schedulerName: "the profile of --config whose NodePoolReady args the labeler applies",
	serve:         &serving{},
	lease:         "pool-labeler",
	scheme:        labeler.Scheme,
	flags:         controllerFlags,
}

func controllerFlags(f *pflag.FlagSet, s *shared) runner {
	var (
		o      labeler.Options
		resync time.Duration
	)
	f.StringSliceVar(&o.Namespaces, "namespaces", nil, "namespaces whose NodePoolLabelSets are applied; with --config its labelSetNamespaces (which this must then equal); without it and without --all-namespaces: the labeler's own namespace ($POD_NAMESPACE, else its ServiceAccount's)")
	f.BoolVar(&o.AllNamespaces, "all-namespaces", false, "without --config: apply the NodePoolLabelSets of every namespace (whoever may write a set in any namespace then decides node labels)")
	f.StringSliceVar(&o.PoolLabelKeys, "pool-label-keys", configv1.DefaultPoolLabelKeys, "ordered node label keys naming a node's pool (without --config)")
	f.DurationVar(&o.HoldWarningAfter, "hold-warning-after", 5*time.Minute, "a Warning event (NodeHeld) on a node that pool-scheduler's NodePoolReady has kept pods off this long; 0: none")
	f.StringVar(&o.StartupTaintKey, "startup-taint-key", pool.StartupTaintKey, "the taint lifted from a node of a pool with a NodePoolLabelSet once its labels are applied (docs/gate.md); empty: none")
	f.BoolVar(&o.OverwriteConflicts, "overwrite-conflicts", false, "apply desired labels over values set by someone else (default: report the conflict in status and events)")
	f.DurationVar(&resync, "resync-period", 10*time.Minute, "how often every node is reconciled again, to catch anything missed")
	return runner{
		complete: func(cmd *cobra.Command) ([]any, error) {
			o.Profile = s.profile
			o.PoolLabelKeysSet, o.NamespacesSet = cmd.Flags().Changed("pool-label-keys"), cmd.Flags().Changed("namespaces")
			err := o.Complete()
			return []any{"schedulerConfig", s.config, "namespaces", o.Namespaces}, err
		},
		managerOptions: func(opts *ctrl.Options) error {
			opts.Cache = labeler.CacheOptions(o, resync)
			return nil
		},
		setup: func(ctx context.Context, mgr ctrl.Manager) error {
			if o.Warning != "" {
				klog.Warning(o.Warning)
			}
			return labeler.SetupWithManager(mgr, o)
		},
	}
}
