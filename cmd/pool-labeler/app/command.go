// Package app assembles the pool-labeler command and its seven modes, as cmd/pool-scheduler/app
// assembles pool-scheduler: controller (pkg/labeler's reconciler of NodePoolLabelSets), domain
// (pkg/domainlabeler's Azure fault- and update-domain labels), webhook (pkg/admission/webhook),
// handoff and handback (pkg/handoff), spread (pkg/spreadkeeper) and certs (pkg/certkeeper).
//
// Every mode has one shape (mode.go): the flags they share (kubeconfig, the scheduler's
// configuration --config and its profile --scheduler-name, metrics, probes, leader election) are
// registered by one function, the configuration is read and decoded once (profile.Load) and
// handed to the mode's Options.Profile, the mode's (*Options).Complete validates its flags, and
// one controller-runtime manager is built here, to which the mode's package adds itself with
// SetupWithManager(mgr, Options). The packages own their policy (what their flags mean and
// allow); this package holds flags and start-up only (TestModeContract). Adding a mode is one
// package and one line in modes below.
package app

import (
	"context"
	"flag"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// modes are pool-labeler's subcommands, in the order of its help (the docs' count of them is
// checked against this list by test/static).
var modes = []mode{
	controllerMode, domainMode, webhookMode, handoffMode, handbackMode, spreadMode, certsMode,
}

// NewCommand returns the pool-labeler command with its modes, one subcommand each.
func NewCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:          "pool-labeler",
		Short:        "Applies NodePoolLabelSets to nodes (controller), labels a node with its Azure fault and update domain (domain), serves the mutating admission webhook (webhook), judges and repairs the hand-off to pool-scheduler (handoff), hands pods back before removal (handback), keeps the spread through scale-downs (spread) and keeps the metrics certificates, their CA apart (certs)",
		Long:         version.String(),
		Version:      version.Version,
		SilenceUsage: true,
	}
	// --version prints the same lines as pool-scheduler --version: the build, then the release line.
	cmd.SetVersionTemplate(version.String() + "\n" + version.Line() + "\n")
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster")
	cmd.PersistentFlags().AddGoFlagSet(goFlagSet())
	for _, m := range modes {
		cmd.AddCommand(m.command(&kubeconfig))
	}
	return cmd
}

// BuildInfoMetric names each pool-labeler process by its mode. The alert rules
// (manifests/monitoring/alerts.yaml) find a component's targets by it, whatever its Service, job
// or Lease is called, and alert when none is scraped, or none of them leads.
const BuildInfoMetric = "pool_labeler_build_info"

var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: BuildInfoMetric,
	Help: "Always 1; mode is the pool-labeler mode the process runs (controller, webhook, handoff, spread, certs), the other labels describe the build.",
}, []string{"mode", "version", "git_commit", "go_version"})

func init() {
	ctrlmetrics.Registry.MustRegister(buildInfo)
}

// start is every mode's process start-up, once its flags are valid: the API server's address,
// credentials and client rate (shared.restConfig), klog as controller-runtime's logger, a
// context that ends on SIGTERM or SIGINT, and the "Starting" line naming the build and the mode.
// It is called once per process (a second signal handler panics).
func start(s *shared, mode string, keysAndValues ...any) (context.Context, *rest.Config, error) {
	cfg, err := s.restConfig()
	if err != nil {
		return nil, nil, err
	}
	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	logger.Info("Starting", append([]any{"version", version.String(), "mode", mode, "kubeAPIQPS", cfg.QPS, "kubeAPIBurst", cfg.Burst}, keysAndValues...)...)
	buildInfo.WithLabelValues(mode, version.Version, version.GitCommit, runtime.Version()).Set(1)
	return ctx, cfg, nil
}

// goFlagSet exposes klog's flags (-v; --logging-format is not needed here).
func goFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
}
