package systempoolguard

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

var (
	rejectionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "pool_scheduler",
		Name:           "systempoolguard_rejections_total",
		Help:           "System nodes refused to user pods by SystemPoolGuard, one per node per scheduling attempt, by what made the node a system node.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	// rejections holds the resolved counter per reason, so Filter does no label lookup.
	rejections   = map[pool.SystemNodeReason]metrics.CounterMetric{}
	registerOnce sync.Once
)

func reasonLabel(r pool.SystemNodeReason) string {
	switch r {
	case pool.SystemPoolName:
		return "system_pool"
	case pool.SystemNodeSelector:
		return "system_node_selector"
	}
	return "user_node"
}

func resolveCounters() {
	for _, r := range []pool.SystemNodeReason{pool.SystemPoolName, pool.SystemNodeSelector} {
		rejections[r] = rejectionsTotal.WithLabelValues(reasonLabel(r))
	}
}

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rejectionsTotal)
		resolveCounters()
	})
}

func init() {
	// Filter must find a counter when the plugin is built without New (unit tests); unregistered
	// metrics are no-ops until registerMetrics re-resolves them.
	resolveCounters()
}
