package app

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pool-scheduler/pool-scheduler/pkg/certkeeper"
)

// certsMode: the certificate keeper, which alone holds the CA keys.
var certsMode = mode{
	name: "certs",
	short: "Keep the /metrics (and optionally the webhook's) serving certificate: the CA and its key in a Secret of their own, the certificate, " +
		"its key and the CA bundle in the Secret the servers mount, rotated with an overlap (Deployment, one replica)",
	serve: &serving{
		ready:   "ready while the last pass over every set succeeded; both served from the start",
		certDir: filepath.Join(os.TempDir(), "pool-scheduler-certs"),
		certDirHelp: "directory the keeper writes the metrics serving certificate to (with --metrics-tls-dns-names), and serves its own /metrics with " +
			"(tls.crt, tls.key; reloaded when they change; self-signed while there are none)",
	},
	flags: certsFlags,
}

func certsFlags(f *pflag.FlagSet, s *shared) runner {
	o := certkeeper.Options{}
	f.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the CA Secret and the serving Secret")
	f.StringVar(&o.CASecret, "metrics-tls-ca-secret", "pool-scheduler-metrics-ca-key", "Secret holding the metrics CA and its key (ca.crt, ca.key, and ca-next.*, ca-previous.crt during a rotation): nothing else may read it (must exist; the chart creates it empty)")
	f.StringVar(&o.TLSSecret, "metrics-tls-secret", "pool-scheduler-metrics-tls", "Secret the /metrics servers mount: tls.crt, tls.key and ca.crt, the bundle of every CA in use (must exist)")
	f.StringSliceVar(&o.DNSNames, "metrics-tls-dns-names", nil, "DNS names of the /metrics serving certificate (<service>.<namespace>.svc ...); the first is its subject; empty: no metrics certificate")
	f.StringSliceVar(&o.CACopies, "metrics-tls-ca-copy", nil, "<namespace>/<name> of Secrets that get the CA bundle alone (ca.crt), for scrapers that must not read tls.key (must exist)")
	f.StringVar(&o.WebhookCASecret, "webhook-tls-ca-secret", "pool-scheduler-webhook-ca-key", "with --webhook-dns-name: Secret holding the webhook's CA and its key (must exist)")
	f.StringVar(&o.WebhookSecret, "webhook-tls-secret", "pool-scheduler-webhook-tls", "with --webhook-dns-name: Secret the webhook mounts (tls.crt, tls.key, ca.crt); a CA an earlier webhook kept there itself (its removed --cert-rotation) is taken over (must exist)")
	f.StringVar(&o.WebhookDNSName, "webhook-dns-name", "", "the webhook Service's <name>.<namespace>.svc: keep the webhook's certificate too; empty: not")
	f.StringVar(&o.WebhookConfiguration, "webhook-configuration", "pool-scheduler", "with --webhook-dns-name: MutatingWebhookConfiguration whose caBundle is kept equal to the CA bundle")
	f.DurationVar(&o.Interval, "interval", time.Minute, "how often the certificates are checked (failures are retried within 10 seconds)")
	return runner{
		complete: func(*cobra.Command) ([]any, error) {
			o.CertDir = s.metricsCertDir
			if err := o.Complete(); err != nil {
				return nil, err
			}
			return []any{"sets", len(o.Sets), "metricsDNSNames", o.DNSNames, "caCopies", o.CACopies, "webhookDNSName", o.WebhookDNSName}, nil
		},
		// Without a metrics set the keeper serves a certificate mounted there (the chart's
		// monitoring.serviceMonitor.tlsSecretName), a self-signed one while there is none.
		managerOptions: func(opts *ctrl.Options) error { return certkeeper.ServeMetricsFromCertDir(&opts.Metrics) },
		setup:          func(_ context.Context, mgr ctrl.Manager) error { return certkeeper.SetupWithManager(mgr, o) },
	}
}
