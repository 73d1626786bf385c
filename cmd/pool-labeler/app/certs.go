package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pool-scheduler/pool-scheduler/pkg/certkeeper"
)

// newCertsCommand returns `certs`: the certificate keeper, which alone holds the CA keys.
func newCertsCommand(kubeconfig *string) *cobra.Command {
	var (
		o                                       certkeeper.Options
		namespace, caSecret, tlsSecret, certDir string
		metricsAddr                             string
		webhookCASecret, webhookSecret          string
		webhookDNSName, webhookConfiguration    string
		dnsNames, caCopies                      []string
		metricsSecure                           bool
	)
	cmd := &cobra.Command{
		Use: "certs",
		Short: "Keep the /metrics (and optionally the webhook's) serving certificate: the CA and its key in a Secret of their own, the certificate, " +
			"its key and the CA bundle in the Secret the servers mount, rotated with an overlap (Deployment, one replica)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" {
				return errors.New("--namespace: required (default: $POD_NAMESPACE)")
			}
			if len(dnsNames) > 0 {
				set := certkeeper.Set{Name: "metrics", CAName: "pool-scheduler-metrics-ca", DNSNames: dnsNames, CertDir: certDir,
					CASecret: types.NamespacedName{Namespace: namespace, Name: caSecret}, ServingSecret: types.NamespacedName{Namespace: namespace, Name: tlsSecret}}
				for _, c := range caCopies {
					ns, name, ok := strings.Cut(c, "/")
					if !ok {
						return fmt.Errorf("--metrics-tls-ca-copy %q: want <namespace>/<name>", c)
					}
					set.CACopies = append(set.CACopies, types.NamespacedName{Namespace: ns, Name: name})
				}
				o.Sets = append(o.Sets, set)
			}
			if webhookDNSName != "" {
				o.Sets = append(o.Sets, certkeeper.Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", DNSNames: []string{webhookDNSName},
					CASecret:             types.NamespacedName{Namespace: namespace, Name: webhookCASecret},
					ServingSecret:        types.NamespacedName{Namespace: namespace, Name: webhookSecret},
					WebhookConfiguration: webhookConfiguration})
			}
			if len(o.Sets) == 0 {
				return errors.New("nothing to keep: --metrics-tls-dns-names and --webhook-dns-name are both empty")
			}
			for _, set := range o.Sets {
				if err := set.Validate(); err != nil {
					return err
				}
			}
			// Without a metrics set the keeper serves a certificate mounted there (the chart's
			// monitoring.serviceMonitor.tlsSecretName), a self-signed one while there is none.
			o.Metrics = metricsOptions(metricsAddr, metricsSecure, certDir)
			ctx, cfg, err := start(*kubeconfig, "certs", "sets", len(o.Sets), "metricsDNSNames", dnsNames, "caCopies", caCopies, "webhookDNSName", webhookDNSName)
			if err != nil {
				return err
			}
			return certkeeper.Run(ctx, cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the CA Secret and the serving Secret")
	f.StringVar(&caSecret, "metrics-tls-ca-secret", "pool-scheduler-metrics-ca-key", "Secret holding the metrics CA and its key (ca.crt, ca.key, and ca-next.*, ca-previous.crt during a rotation): nothing else may read it (must exist; the chart creates it empty)")
	f.StringVar(&tlsSecret, "metrics-tls-secret", "pool-scheduler-metrics-tls", "Secret the /metrics servers mount: tls.crt, tls.key and ca.crt, the bundle of every CA in use (must exist)")
	f.StringSliceVar(&dnsNames, "metrics-tls-dns-names", nil, "DNS names of the /metrics serving certificate (<service>.<namespace>.svc ...); the first is its subject; empty: no metrics certificate")
	f.StringSliceVar(&caCopies, "metrics-tls-ca-copy", nil, "<namespace>/<name> of Secrets that get the CA bundle alone (ca.crt), for scrapers that must not read tls.key (must exist)")
	f.StringVar(&webhookCASecret, "webhook-tls-ca-secret", "pool-scheduler-webhook-ca-key", "with --webhook-dns-name: Secret holding the webhook's CA and its key (must exist)")
	f.StringVar(&webhookSecret, "webhook-tls-secret", "pool-scheduler-webhook-tls", "with --webhook-dns-name: Secret the webhook mounts (tls.crt, tls.key, ca.crt); a CA kept there by the webhook itself (--cert-rotation) is taken over (must exist)")
	f.StringVar(&webhookDNSName, "webhook-dns-name", "", "the webhook Service's <name>.<namespace>.svc: keep the webhook's certificate too; empty: not")
	f.StringVar(&webhookConfiguration, "webhook-configuration", "pool-scheduler", "with --webhook-dns-name: MutatingWebhookConfiguration whose caBundle is kept equal to the CA bundle")
	f.DurationVar(&o.Interval, "interval", time.Minute, "how often the certificates are checked (failures are retried within 10 seconds)")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables")
	f.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the apiserver authenticates and authorizes (get on /metrics); false: plain HTTP, bind it to 127.0.0.1")
	f.StringVar(&certDir, "metrics-cert-dir", filepath.Join(os.TempDir(), "pool-scheduler-certs"), "directory the keeper writes the metrics serving certificate to (with --metrics-tls-dns-names), and serves its own /metrics with (tls.crt, tls.key; reloaded when they change; self-signed while there are none)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (ready while the last pass over every set succeeded; both served from the start); 0 disables")
	return cmd
}
