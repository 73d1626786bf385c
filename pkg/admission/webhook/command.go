package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	admissionpkg "github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// WebhookOptions configure `pool-labeler webhook`.
type WebhookOptions struct {
	// Config is the scheduler's configuration file: the webhook mutates for its profile.
	Config        string
	SchedulerName string
	// SystemNodeAffinity adds the node affinity that keeps user pods off system nodes.
	SystemNodeAffinity bool
	Port               int
	CertDir            string
	// CertRotation: generate and rotate the CA and serving certificate in Secret and inject
	// the CA into WebhookConfiguration. Off: CertDir holds tls.crt and tls.key (cert-manager).
	CertRotation         bool
	Secret               types.NamespacedName
	WebhookConfiguration string
	DNSName              string
	MetricsAddr          string
	MetricsSecure        bool
	MetricsCertDir       string
	ProbeAddr            string
	// Metrics builds the metrics server's options (the labeler's: authenticated and authorized
	// HTTPS unless MetricsSecure is false); nil: plain HTTP on MetricsAddr.
	Metrics func(addr string, secure bool, certDir string) metricsserver.Options
}

// Validate names the flag at fault.
func (o *WebhookOptions) Validate() error {
	var errs []error
	if o.Config == "" {
		errs = append(errs, errors.New("--config: required (the scheduler's configuration file)"))
	}
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port: %d is not a TCP port", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir: required"))
	}
	if o.CertRotation {
		if o.Secret.Namespace == "" {
			errs = append(errs, errors.New("--secret-namespace: required with --cert-rotation (default: $POD_NAMESPACE)"))
		}
		if o.Secret.Name == "" {
			errs = append(errs, errors.New("--secret-name: required with --cert-rotation"))
		}
		if o.WebhookConfiguration == "" {
			errs = append(errs, errors.New("--webhook-configuration: required with --cert-rotation"))
		}
		if o.DNSName == "" {
			errs = append(errs, errors.New("--dns-name: required with --cert-rotation (the Service's <name>.<namespace>.svc)"))
		}
	}
	return errors.Join(errs...)
}

// NewWebhookCommand returns `webhook`: the mutating admission webhook.
func NewWebhookCommand(kubeconfig *string, restConfig func(string) (*rest.Config, error), scheme *runtime.Scheme,
	metrics func(addr string, secure bool, certDir string) metricsserver.Options) *cobra.Command {
	o := WebhookOptions{Metrics: metrics}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the mutating admission webhook that gives pods of opted-in namespaces to pool-scheduler (Deployment)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			m, err := MutatorFromConfig(o.Config, o.SchedulerName, o.SystemNodeAffinity)
			if err != nil {
				return err
			}
			cfg, err := restConfig(*kubeconfig)
			if err != nil {
				return err
			}
			logger := klog.NewKlogr()
			ctrl.SetLogger(logger)
			logger.Info("Starting", "version", version.String(), "mode", "webhook", "schedulerName", m.SchedulerName(),
				"systemNodeAffinity", m.AvoidSystem() != nil)
			return RunWebhook(ctrl.SetupSignalHandler(), cfg, scheme, m, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Config, "config", "", "the scheduler's KubeSchedulerConfiguration file (the mounted ConfigMap), so the webhook mutates for what the scheduler enforces")
	f.StringVar(&o.SchedulerName, "scheduler-name", "", "profile of --config to set on pods; empty: the first profile")
	f.BoolVar(&o.SystemNodeAffinity, "system-node-affinity", true, "add a required node-affinity term keeping user pods off system nodes (visible to cluster-autoscaler and Karpenter)")
	f.IntVar(&o.Port, "port", 10250, "HTTPS port of the webhook (10250: open from the control plane to nodes on GKE private clusters and others that firewall other ports, as for kubelets; cert-manager uses it too)")
	f.StringVar(&o.CertDir, "cert-dir", filepath.Join(os.TempDir(), "pool-scheduler-webhook"), "directory of tls.crt and tls.key")
	f.BoolVar(&o.CertRotation, "cert-rotation", true, "generate and rotate the certificate (Secret --secret-name, CA injected into --webhook-configuration); off: cert-dir is filled by someone else (cert-manager)")
	f.StringVar(&o.Secret.Namespace, "secret-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the certificate Secret")
	f.StringVar(&o.Secret.Name, "secret-name", "pool-scheduler-webhook-tls", "the certificate Secret (must exist; the chart creates it empty)")
	f.StringVar(&o.WebhookConfiguration, "webhook-configuration", "pool-scheduler", "MutatingWebhookConfiguration whose caBundle is kept current")
	f.StringVar(&o.DNSName, "dns-name", "", "DNS name of the webhook Service (<service>.<namespace>.svc), the certificate's subject")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables")
	f.BoolVar(&o.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the apiserver authenticates and authorizes (get on /metrics), as pool-labeler controller does; false: plain HTTP, bind it to 127.0.0.1")
	f.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "directory with the metrics server's tls.crt and tls.key; empty: a self-signed certificate")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (ready once the certificate is served); 0 disables")
	return cmd
}

// MutatorFromConfig builds the Mutator for profile schedulerName of the scheduler
// configuration file path, from the same defaulted args the scheduler uses.
func MutatorFromConfig(path, schedulerName string, systemNodeAffinity bool) (*admissionpkg.Mutator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	name, args, err := report.LoadProfileArgs(data, schedulerName)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	m, err := admissionpkg.NewMutator(name, args.SystemPoolGuard, systemNodeAffinity)
	if err != nil {
		return nil, fmt.Errorf("--config %s: profile %s: %w", path, name, err)
	}
	return m, nil
}

// RunWebhook serves the webhook until ctx ends.
func RunWebhook(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, m *admissionpkg.Mutator, o WebhookOptions) error {
	cacheOpts := cache.Options{}
	if o.CertRotation {
		// The manager's cache holds the certificate Secret and the webhook configuration only
		// (field selectors by name, which RBAC resourceNames allow for list and watch).
		cacheOpts.ByObject = map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{o.Secret.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", o.Secret.Name),
			},
			&admissionregistrationv1.MutatingWebhookConfiguration{}: {
				Field: fields.OneTermEqualSelector("metadata.name", o.WebhookConfiguration),
			},
		}
	}
	metrics := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.Metrics != nil {
		metrics = o.Metrics(o.MetricsAddr, o.MetricsSecure, o.MetricsCertDir)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metrics,
		HealthProbeBindAddress: o.ProbeAddr,
	})
	if err != nil {
		return err
	}
	server := webhook.NewServer(webhook.Options{Port: o.Port, CertDir: o.CertDir})
	serveMutations(server, m, scheme)

	// ready: the certificate is on disk (the server reads it when it starts) and, when this
	// process keeps it, the apiserver trusts it.
	ready := func() error { return nil }
	certsWritten := make(chan struct{})
	if o.CertRotation {
		if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
		keeper, err := newCertKeeper(mgr, o)
		if err != nil {
			return fmt.Errorf("certificate rotation: %w", err)
		}
		certsWritten, ready = keeper.written, keeper.Ready
	} else {
		close(certsWritten)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-certsWritten:
		case <-ctx.Done():
			return nil
		}
		return server.Start(ctx)
	})); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		if err := ready(); err != nil {
			return err
		}
		return server.StartedChecker()(req)
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
