package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	handoffMode = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pool_scheduler_webhook_handoff",
		Help: "1 while the webhook hands pods to pool-scheduler (its leader renewed its Lease within the lease duration, or --handoff=always), 0 while it leaves them with the default scheduler (degraded).",
	})
	apiserverSupported = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pool_scheduler_webhook_apiserver_supported",
		Help: "1 while kube-apiserver's version is one this release line serves (its own minor or the next), 0 outside: pods are then not handed to pool-scheduler.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(handoffMode, apiserverSupported)
	apiserverSupported.Set(1)
}
