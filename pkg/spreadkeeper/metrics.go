package spreadkeeper

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registered with controller-runtime's registry, which pool-labeler's metrics server serves (as
// the labeler's and the hand-off controller's metrics are).
var (
	patchesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_deletion_cost_patches_total",
		Help: "Pod patches of the deletion-cost keeper (the pod-deletion-cost annotation only), by result: success, gone (the pod was deleted or replaced first), error.",
	}, []string{"result"})
	syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_deletion_cost_syncs_total",
		Help: "Workloads whose removal order the deletion-cost keeper computed, by result (success, error: retried with backoff).",
	}, []string{"result"})
	evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_rebalance_evictions_total",
		Help: "Replicas the rebalancer chose to move, by result: evicted, dry_run (only reported), refused (a PodDisruptionBudget or the API refused the eviction), error.",
	}, []string{"result"})
	skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_scheduler_rebalance_skipped_total",
		Help: "Workloads beyond the skew the rebalancer left alone in a pass, by reason: system_critical, system_pod, local_storage, opted_out, do_not_disrupt, no_fit, skew_not_lowered (these back off), limit_pass, limit_node, limit_namespace (the caps per pass), pool_upgrading (a pool it is on or may move to upgrades: judged again each pass).",
	}, []string{"reason"})
	pausedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pool_scheduler_rebalance_paused",
		Help: "1 while the rebalancer evicts nothing because pool-scheduler is degraded (the hand-off controller's switch says new pods keep the default scheduler, or cannot be read), 0 while it runs its passes.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(patchesTotal, syncs, evictions, skipped, pausedGauge)
}
