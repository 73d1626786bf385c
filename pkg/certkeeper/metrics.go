package certkeeper

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registered with controller-runtime's registry, which pool-labeler's metrics server serves.
var (
	notAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_certificate_not_after_timestamp_seconds",
		Help: "Expiry (Unix seconds) of the certificates the certificate keeper (pool-labeler certs) keeps, by Secret and certificate: serving (renewed 90 days before it expires) or ca (rotated with an overlap from 90 days before).",
	}, []string{"secret", "certificate"})
	syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_certificate_syncs_total",
		Help: "Passes of the certificate keeper over a set of certificates, by set and result (success, error: retried within 10 seconds).",
	}, []string{"set", "result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(notAfter, syncs)
}
