package app

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

func newControllerCommand(kubeconfig *string) *cobra.Command {
	var (
		namespaces           []string
		poolLabelKeys        []string
		overwrite            bool
		leaderElect          bool
		leaderElectNamespace string
		leaseDuration        time.Duration
		renewDeadline        time.Duration
		retryPeriod          time.Duration
		metricsAddr          string
		metricsSecure        bool
		metricsCertDir       string
		probeAddr            string
		resync               time.Duration
		schedulerConfig      string
		schedulerName        string
		holdWarningAfter     time.Duration
		allNamespaces        bool
		startupTaintKey      string
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Reconcile every node towards its pool's NodePoolLabelSet (leader-elected Deployment)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := validation.ValidateLabelKeys(poolLabelKeys, nil); len(errs) > 0 {
				return fmt.Errorf("--pool-label-keys: %v", errs.ToAggregate())
			}
			if err := validateLeaderElection(leaseDuration, renewDeadline, retryPeriod); err != nil {
				return err
			}
			if holdWarningAfter < 0 {
				return fmt.Errorf("--hold-warning-after must not be negative, got %v", holdWarningAfter)
			}
			gate, err := controllerGate(cmd, schedulerConfig, schedulerName, poolLabelKeys, &namespaces)
			if err != nil {
				return err
			}
			var warning string
			if schedulerConfig == "" {
				namespaces, warning, err = namespacesWithoutConfig(cmd.Flags().Changed("namespaces"), allNamespaces, namespaces, ownNamespace(os.Getenv, serviceAccountNamespaceFile))
			} else if allNamespaces {
				err = errors.New("--all-namespaces: not with --scheduler-config, whose labelSetNamespaces the labeler uses (empty: every namespace)")
			}
			if err != nil {
				return err
			}
			ctx, cfg, err := start(*kubeconfig, "controller", "schedulerConfig", schedulerConfig, "namespaces", namespaces)
			if err != nil {
				return err
			}
			if warning != "" {
				klog.Warning(warning)
			}
			cacheOpts := cache.Options{SyncPeriod: &resync}
			if len(namespaces) > 0 {
				byNS := map[string]cache.Config{}
				for _, ns := range namespaces {
					byNS[ns] = cache.Config{}
				}
				cacheOpts.ByObject = map[client.Object]cache.ByObject{&labelsv1alpha1.NodePoolLabelSet{}: {Namespaces: byNS}}
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                  labeler.Scheme,
				Cache:                   cacheOpts,
				Metrics:                 metricsOptions(metricsAddr, metricsSecure, metricsCertDir),
				HealthProbeBindAddress:  probeAddr,
				LeaderElection:          leaderElect,
				LeaderElectionID:        "pool-labeler",
				LeaderElectionNamespace: leaderElectNamespace,
				LeaseDuration:           &leaseDuration,
				RenewDeadline:           &renewDeadline,
				RetryPeriod:             &retryPeriod,
			})
			if err != nil {
				return err
			}
			if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
				return err
			}
			if err := labeler.SetupWithManager(mgr, labeler.Options{Gate: gate, Namespaces: namespaces, OverwriteConflicts: overwrite, HoldWarningAfter: holdWarningAfter, StartupTaintKey: startupTaintKey}); err != nil {
				return err
			}
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration file (its ConfigMap mounted): NodePoolReady's args there give the pool label keys, the rule the status judges nodes by, and the NodePoolLabelSet namespaces (labelSetNamespaces); empty: the plugin's defaults and --pool-label-keys")
	f.StringVar(&schedulerName, "scheduler-name", "pool-scheduler", "the profile of --scheduler-config")
	f.StringSliceVar(&namespaces, "namespaces", nil, "namespaces whose NodePoolLabelSets are applied; with --scheduler-config its labelSetNamespaces (which this must then equal); without it and without --all-namespaces: the labeler's own namespace ($POD_NAMESPACE, else its ServiceAccount's)")
	f.BoolVar(&allNamespaces, "all-namespaces", false, "without --scheduler-config: apply the NodePoolLabelSets of every namespace (whoever may write a set in any namespace then decides node labels)")
	f.StringSliceVar(&poolLabelKeys, "pool-label-keys", configv1.DefaultPoolLabelKeys, "ordered node label keys naming a node's pool (without --scheduler-config)")
	f.DurationVar(&holdWarningAfter, "hold-warning-after", 5*time.Minute, "a Warning event (NodeHeld) on a node that pool-scheduler's NodePoolReady has kept pods off this long; 0: none")
	f.StringVar(&startupTaintKey, "startup-taint-key", pool.StartupTaintKey, "the taint lifted from a node of a pool with a NodePoolLabelSet once its labels are applied (docs/gate.md); empty: none")
	f.BoolVar(&overwrite, "overwrite-conflicts", false, "apply desired labels over values set by someone else (default: report the conflict in status and events)")
	f.BoolVar(&leaderElect, "leader-elect", true, "elect a leader on the Lease pool-labeler, so replicas can run side by side")
	f.StringVar(&leaderElectNamespace, "leader-elect-namespace", "", "namespace of the Lease; empty: the pod's namespace")
	// kube-scheduler's flag names and defaults.
	f.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the last renewal before taking the Lease over")
	f.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps retrying a renewal before it gives up leading (less than the lease duration)")
	f.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables")
	f.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the apiserver authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the non-resource URL /metrics); false: plain HTTP to anyone who can connect, so bind it to 127.0.0.1")
	f.StringVar(&metricsCertDir, "metrics-cert-dir", "", "directory with the metrics server's tls.crt and tls.key; empty or missing files: a self-signed certificate")
	f.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables")
	f.DurationVar(&resync, "resync-period", 10*time.Minute, "how often every node is reconciled again, to catch anything missed")
	return cmd
}

// validateLeaderElection checks the Lease timings as client-go's leader election requires them.
func validateLeaderElection(lease, renew, retry time.Duration) error {
	switch {
	case retry <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %v", retry)
	case float64(renew) <= 1.2*float64(retry): // client-go's leaderelection.JitterFactor
		return fmt.Errorf("--leader-elect-renew-deadline (%v) must be greater than 1.2 x --leader-elect-retry-period (%v)", renew, retry)
	case lease <= renew:
		return fmt.Errorf("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", lease, renew)
	}
	return nil
}

// controllerGate returns NodePoolReady's rule for the status: from the scheduler's configuration
// when given (the same defaulted, validated args the scheduler runs with), else the plugin's
// defaults with --pool-label-keys. With the configuration, the NodePoolLabelSet namespace is
// its labelSetNamespace, so the labeler and the scheduler see the same sets; an explicit
// --namespaces or --pool-label-keys that disagrees is refused rather than silently overridden.
func controllerGate(cmd *cobra.Command, path, schedulerName string, poolLabelKeys []string, namespaces *[]string) (pool.Gate, error) {
	if path == "" {
		defaults := profile.DefaultArgs()
		args := defaults.NodePoolReady
		args.PoolLabelKeys = poolLabelKeys
		return pool.NewGateWithSystemArgs(args, defaults.SystemPoolGuard), nil
	}
	if cmd.Flags().Changed("pool-label-keys") {
		return pool.Gate{}, errors.New("--pool-label-keys: not with --scheduler-config, whose NodePoolReady poolLabelKeys the labeler uses")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return pool.Gate{}, fmt.Errorf("--scheduler-config: %w", err)
	}
	gate, ns, err := labeler.GateFromSchedulerConfig(data, schedulerName)
	if err != nil {
		return pool.Gate{}, fmt.Errorf("--scheduler-config %s: %w", path, err)
	}
	switch {
	case !cmd.Flags().Changed("namespaces"):
		*namespaces = ns
	case !sameNamespaces(*namespaces, ns):
		return pool.Gate{}, fmt.Errorf("--namespaces=%s disagrees with the scheduler's labelSetNamespaces %q in %s: the labeler and the scheduler must read the same NodePoolLabelSets; drop --namespaces", strings.Join(*namespaces, ","), ns, path)
	}
	return gate, nil
}

// serviceAccountNamespaceFile is where a pod's ServiceAccount token volume puts its namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the labeler's namespace: $POD_NAMESPACE (the Deployments set it from the
// downward API), else the ServiceAccount token volume's namespace file; "" outside a pod.
func ownNamespace(getenv func(string) string, saFile string) string {
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(saFile); err == nil {
		return strings.TrimSpace(string(data))
	}
	return ""
}

// namespacesWithoutConfig returns the namespaces whose NodePoolLabelSets the controller applies
// without --scheduler-config, and a warning to log. --namespaces names them, --all-namespaces
// takes every namespace; with neither, only its own namespace (the release's, where the shipped
// configuration's labelSetNamespaces puts them): whoever may write a NodePoolLabelSet in a
// namespace the labeler reads decides node labels, so reading every namespace must be asked for.
func namespacesWithoutConfig(namespacesSet, all bool, namespaces []string, own string) ([]string, string, error) {
	switch {
	case all && namespacesSet:
		return nil, "", errors.New("--all-namespaces and --namespaces: give one")
	case all:
		return nil, "", nil
	case namespacesSet:
		if len(namespaces) == 0 {
			return nil, "", errors.New("--namespaces is empty: name the namespaces, or give --all-namespaces for every namespace")
		}
		return namespaces, "", nil
	case own == "":
		return nil, "", errors.New("no --scheduler-config, --namespaces or --all-namespaces, and no namespace of its own ($POD_NAMESPACE, or " + serviceAccountNamespaceFile + "): say whose NodePoolLabelSets to apply")
	}
	return []string{own}, fmt.Sprintf("No --scheduler-config or --namespaces: applying the NodePoolLabelSets of namespace %s only (its own). "+
		"Name others with --namespaces=<ns>,<ns>, every namespace with --all-namespaces, or give --scheduler-config (its NodePoolReady labelSetNamespaces, as the scheduler reads them)", own), nil
}

// sameNamespaces reports whether a and b name the same namespaces, in any order.
func sameNamespaces(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
