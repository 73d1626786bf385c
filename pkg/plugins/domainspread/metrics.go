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

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(rejectionsTotal) })
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
