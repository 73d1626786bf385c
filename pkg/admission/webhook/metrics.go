package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	handoffMode = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pool_scheduler_webhook_handoff",
		Help: "1 while the webhook hands pods to pool-scheduler (its leader renewed its Lease within the lease duration and, with --handoff-switch-configmap, the hand-off controller's switch says it schedules; or --handoff=always), 0 while it leaves them with the default scheduler (degraded).",
	})
	leaderWedged = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pool_scheduler_webhook_leader_wedged",
		Help: "1 while pool-scheduler's leader renews its Lease but the hand-off controller's switch (--handoff-switch-configmap) says it does not schedule (its heartbeat shows it wedged), or cannot be read: pods then keep the default scheduler. 0 otherwise.",
	})
	apiserverSupported = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pool_scheduler_webhook_apiserver_supported",
		Help: "1 while kube-apiserver's version is one this release line serves (its own minor or the next), 0 outside: pods are then not handed to pool-scheduler.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(handoffMode, leaderWedged, apiserverSupported)
	apiserverSupported.Set(1)
}

func setGauge(g prometheus.Gauge, on bool) {
	if on {
		g.Set(1)
		return
	}
	g.Set(0)
}
