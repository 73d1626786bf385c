package floor

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registered with controller-runtime's registry, which pool-labeler's metrics server serves.
var (
	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_budget_floor_writes_total",
		Help: "PodDisruptionBudget writes of the budget floor, by operation (create, update, delete) and result (success, error: retried with backoff).",
	}, []string{"operation", "result"})
	workloadsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_scheduler_budget_floor_workloads",
		Help: "Deployments and StatefulSets of 3 or more replicas in namespaces opted in to the budget floor, by what the floor does: kept (it keeps their budget), own_budget (a budget of another matches them), overlapping_selector (their selector matches another workload's pods), invalid_selector, opted_out, name_taken, eviction_autoscaler (the namespace is the eviction-autoscaler's).",
	}, []string{"reason"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(writes, workloadsGauge)
}
