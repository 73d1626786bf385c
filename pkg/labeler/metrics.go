package labeler

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_labeler_reconciles_total",
		Help: "Reconciles by controller (node, nodepoollabelset) and result (success, error).",
	}, []string{"controller", "result"})
	patchErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pool_labeler_node_patch_errors_total",
		Help: "Node patches that failed (conflicting writes excluded: they are retried).",
	})
	conditionWritesDeferred = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pool_labeler_condition_writes_deferred_total",
		Help: "Writes of a node's condition PoolLabelsApplied deferred because the node's condition was rewritten too often (another writer setting it).",
	})
	nodesOutOfSync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_labeler_nodes_out_of_sync",
		Help: "Nodes of a NodePoolLabelSet's pool that do not carry its labels yet, by set.",
	}, []string{"namespace", "name"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(reconciles, patchErrors, conditionWritesDeferred, nodesOutOfSync, holdMetrics)
}

func recordReconcile(controller string, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	reconciles.WithLabelValues(controller, result).Inc()
}
