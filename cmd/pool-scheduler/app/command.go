// Package app assembles the pool-scheduler command: kube-scheduler with our plugins
// (pkg/plugins.Registry, which tests run in process) and, on the lines that bundle it,
// scheduler-plugins' (schedulerplugins_k8s134.go).
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	kubescheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/heartbeat"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// DisableHTTP2Flag is kube-scheduler's flag (k8s.io/apiserver SecureServingOptions) that keeps
// HTTP/2 off the secure port; pool-scheduler defaults it to true.
const DisableHTTP2Flag = "disable-http2-serving"

// NewCommand returns the kube-scheduler command with every plugin registered.
func NewCommand() *cobra.Command {
	var opts []kubescheduler.Option
	// The profiles of --config, read before kube-scheduler builds them: NodePoolReady needs its
	// profile's SystemPoolGuard args (plugins.RegistryFor).
	var profiles []schedconfig.KubeSchedulerProfile
	for name, factory := range checkingVersion(plugins.RegistryFor(func() []schedconfig.KubeSchedulerProfile { return profiles })) {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	for name, factory := range schedulerPlugins {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	cmd := newSchedulerCommand(opts...)
	// HTTP/1.1 only on the secure port unless --disable-http2-serving=false is given, as on our
	// other servers (internal/tlsserving says why).
	if f := cmd.Flags().Lookup(DisableHTTP2Flag); f != nil {
		if err := f.Value.Set("true"); err != nil {
			panic(fmt.Sprintf("--%s: %v", DisableHTTP2Flag, err))
		}
		f.DefValue = "true"
	}
	cmd.Use = "pool-scheduler"
	cmd.Short = "pool-scheduler: kube-scheduler with node-pool plugins (NodePoolReady, NodePoolAffinity, SystemPoolGuard, DomainSpread)"
	cmd.Long = version.String() + "\n\n" + cmd.Short + ".\n\n" +
		"It runs the stock kube-scheduler (its flags, configuration and metrics); its leader also publishes a heartbeat of its scheduling loop on its Lease, which the hand-off controller reads (docs/operations.md)."
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// kube-scheduler's --version names only the Kubernetes release; ours comes first so an
		// image or a binary can be traced to its commit, then the release line (Kubernetes
		// release and minor, scheduler-plugins bundled or not). --version=raw stays upstream's.
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			fmt.Fprintf(c.OutOrStdout(), "%s\n%s\n", version.String(), version.Line())
			return nil
		}
		version.RegisterMetric()
		profiles = configProfiles(c)
		return run(c, args)
	}
	return cmd
}

// configProfiles returns the profiles of the command's --config, decoded as kube-scheduler
// decodes them; none without --config or when it cannot be read (kube-scheduler then reports
// the error itself, or runs its defaults, where NodePoolReady gets SystemPoolGuard's defaults).
func configProfiles(c *cobra.Command) []schedconfig.KubeSchedulerProfile {
	f := c.Flags().Lookup("config")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	data, err := os.ReadFile(f.Value.String())
	if err == nil {
		var cfg *schedconfig.KubeSchedulerConfiguration
		if cfg, err = profile.LoadConfiguration(data); err == nil {
			return cfg.Profiles
		}
	}
	// Said, not silent: the labeler may be reading this file's keys while the gate reads defaults.
	klog.Background().Info("Warning: cannot read the profiles of --config; NodePoolReady ignores the default systemNodeSelector keys in label sets",
		"config", f.Value.String(), "err", err)
	return nil
}

// newSchedulerCommand is kube-scheduler's NewSchedulerCommand (the same in 1.34 and 1.36: flags,
// usage, feature gates), but for one step of its run: the leader's Lease lock publishes the
// heartbeat (pkg/heartbeat) with each renewal. Upstream's command keeps its options private, so
// the lock cannot be reached from outside it.
func newSchedulerCommand(registryOptions ...kubescheduler.Option) *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: "kube-scheduler",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates are set before RunE.
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCommand(cmd, opts, registryOptions...)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	fs := cmd.Flags()
	for _, f := range nfs.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	if err := cmd.MarkFlagFilename("config", "yaml", "yml", "json"); err != nil {
		klog.Background().Error(err, "Failed to mark flag filename")
	}
	return cmd
}

// runCommand is kube-scheduler's runCommand, with the heartbeat lock in place of its Lease lock.
func runCommand(cmd *cobra.Command, opts *options.Options, registryOptions ...kubescheduler.Option) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	cliflag.PrintFlags(cmd.Flags())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()

	cc, sched, err := kubescheduler.Setup(ctx, opts, registryOptions...)
	if err != nil {
		return err
	}
	if cc.LeaderElection != nil {
		if ll, ok := cc.LeaderElection.Lock.(*resourcelock.LeaseLock); ok {
			loop := &heartbeat.Loop{
				Gatherer: legacyregistry.DefaultGatherer,
				Pods:     cc.InformerFactory.Core().V1().Pods().Informer(),
				Nodes:    cc.InformerFactory.Core().V1().Nodes().Informer(),
			}
			cc.LeaderElection.Lock = &heartbeat.Lock{LeaseLock: ll, Sample: loop.Sample}
		} else {
			klog.FromContext(ctx).Info("Warning: leader election does not use a Lease: no heartbeat is published, and the hand-off judges the leader by its lock alone", "lock", cc.LeaderElection.Lock.Describe())
		}
	}
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()
	return kubescheduler.Run(ctx, cc, sched)
}
