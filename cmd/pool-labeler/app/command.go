// Package app assembles the pool-labeler command and its seven modes, as cmd/pool-scheduler/app
// assembles pool-scheduler: controller (pkg/labeler's reconciler of NodePoolLabelSets), domain
// (pkg/labeler's Azure fault- and update-domain labels), webhook (pkg/admission/webhook), handoff
// and handback (pkg/handoff), spread (pkg/spreadkeeper) and certs (pkg/certkeeper).
// Flags, validation and process start-up (kubeconfig, logger, metrics server) live here once;
// the packages below are libraries that tests run in process.
package app

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/internal/tlsserving"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// NewCommand returns the pool-labeler command with its modes, one subcommand each (the docs'
// count of them is checked against this list by test/static).
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
	klogFlags := goFlagSet()
	cmd.PersistentFlags().AddGoFlagSet(klogFlags)
	cmd.AddCommand(newControllerCommand(&kubeconfig), newDomainCommand(&kubeconfig), newWebhookCommand(&kubeconfig), newHandoffCommand(&kubeconfig), newHandbackCommand(&kubeconfig), newSpreadCommand(&kubeconfig), newCertsCommand(&kubeconfig))
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

// start is every mode's process start-up, once its flags are valid: the API server's address
// and credentials (--kubeconfig, else in-cluster), klog as controller-runtime's logger, a
// context that ends on SIGTERM or SIGINT, and the "Starting" line naming the build and the mode.
// It is called once per process (a second signal handler panics).
func start(kubeconfig, mode string, keysAndValues ...any) (context.Context, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	logger.Info("Starting", append([]any{"version", version.String(), "mode", mode}, keysAndValues...)...)
	buildInfo.WithLabelValues(mode, version.Version, version.GitCommit, runtime.Version()).Set(1)
	return ctx, cfg, nil
}

// metricsOptions: by default /metrics is served over HTTPS, and every request is authenticated
// and authorized through the apiserver (controller-runtime's filters), as kube-scheduler's secure
// port is: the node-label and label-set names in the labeler's metrics are not for anyone who can
// reach the pod. HTTP/1.1 only (tlsserving.DisableHTTP2).
func metricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if secure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = certDir
		opts.TLSOpts = []func(*tls.Config){tlsserving.DisableHTTP2}
	}
	return opts
}

// goFlagSet exposes klog's flags (-v; --logging-format is not needed here).
func goFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
}
