package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
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
	f.IntVar(&o.Port, "port", 9443, "HTTPS port of the webhook")
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
		// Only the certificate Secret is read from the manager's cache.
		cacheOpts.ByObject = map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{o.Secret.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.Secret.Name),
		}}
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

	certsReady := make(chan struct{})
	if o.CertRotation {
		if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
		if err := rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      o.Secret,
			CertDir:        o.CertDir,
			CAName:         "pool-scheduler-webhook-ca",
			CAOrganization: "pool-scheduler",
			DNSName:        o.DNSName,
			IsReady:        make(chan struct{}),
			Webhooks:       []rotator.WebhookInfo{{Name: o.WebhookConfiguration, Type: rotator.Mutating}},
		}); err != nil {
			return fmt.Errorf("certificate rotation: %w", err)
		}
		if err := addCertSync(mgr, o, certsReady); err != nil {
			return err
		}
	} else {
		close(certsReady)
	}
	// The server reads its certificate when it starts (and watches the files after): start it
	// once the first certificate is on disk.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-certsReady:
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
		select {
		case <-certsReady:
			return server.StartedChecker()(req)
		default:
			return errors.New("no serving certificate yet")
		}
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// addCertSync writes the Secret's certificate and key to CertDir whenever they change: the
// webhook server watches those files, and no kubelet volume sync (up to a minute late) sits
// between a rotation and the server. certsReady closes after the first write.
func addCertSync(mgr manager.Manager, o WebhookOptions, certsReady chan struct{}) error {
	informer, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		return err
	}
	var once sync.Once
	write := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Namespace != o.Secret.Namespace || s.Name != o.Secret.Name {
			return
		}
		cert, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
		if len(cert) == 0 || len(key) == 0 {
			return
		}
		changed := false
		for name, data := range map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key} {
			c, err := writeIfChanged(filepath.Join(o.CertDir, name), data)
			if err != nil {
				klog.Background().Error(err, "Cannot write the serving certificate", "dir", o.CertDir)
				return
			}
			changed = changed || c
		}
		if changed {
			klog.Background().Info("Serving certificate written", "dir", o.CertDir, "secret", o.Secret)
		}
		once.Do(func() { close(certsReady) })
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    write,
		UpdateFunc: func(_, obj any) { write(obj) },
	})
	return err
}

// writeIfChanged replaces path atomically (a rename) when its content differs.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}
