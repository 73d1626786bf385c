package domainspread

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	rejectionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "pool_scheduler",
		Name:           "domainspread_rejections_total",
		Help:           "Nodes rejected by DomainSpread in Hard mode, one per node per scheduling attempt, by the dimension at fault.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"dimension"})

	surgeBatchTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "pool_scheduler",
		Name:           "domainspread_surge_batch_placements_total",
		Help:           "Placements that put more than a third of a workload on the surge nodes of an upgrade under way, which it drains together at its end (event ReplicasOnSurgeNodes on the pod).",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(rejectionsTotal, surgeBatchTotal) })
}

// rejectionCounters resolves one counter per dimension, so Filter does no label lookup. Before
// registration the counters are no-ops, which is what unit tests built without New get.
func rejectionCounters(dims []dimension) []metrics.CounterMetric {
	out := make([]metrics.CounterMetric, len(dims))
	for d, dim := range dims {
		out[d] = rejectionsTotal.WithLabelValues(dim.name)
	}
	return out
}
