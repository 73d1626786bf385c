package nodepoolready

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

var (
	rejectionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "pool_scheduler",
		Name:           "nodepoolready_rejections_total",
		Help:           "Nodes rejected by NodePoolReady, one per node per scheduling attempt, by reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	labelSetProblems = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "pool_scheduler",
		Name:           "nodepoolready_labelset_problems",
		Help:           "Entries of NodePoolLabelSets that NodePoolReady ignores: invalid labels or conflicts between sets of one pool.",
		StabilityLevel: metrics.ALPHA,
	})

	lateRejections = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem: "pool_scheduler",
		Name:      "nodepoolready_late_rejections_total",
		Help: "Chosen nodes NodePoolReady refused at Reserve: Filter was skipped because every node it knew of was ready, " +
			"but the scheduler's snapshot already held a node that was not (the pod is retried after its backoff, with Filter on).",
		StabilityLevel: metrics.ALPHA,
	})

	unreadyNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "pool_scheduler",
		Name:           "nodepoolready_unready_nodes",
		Help:           "Nodes NodePoolReady finds not ready (pool labels not applied, stale or missing). While it is 0, Filter is skipped.",
		StabilityLevel: metrics.ALPHA,
	})

	unreadLabelSets = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "pool_scheduler",
		Name:      "nodepoolready_unread_labelsets",
		Help: "NodePoolLabelSets in namespaces outside labelSetNamespaces, by namespace: NodePoolReady does not read them, " +
			"so the nodes of their pools are not held until labelled.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace"})

	poolsNotVisible = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: "pool_scheduler",
		Name:      "nodepoolready_pools_labelset_not_visible",
		Help: "Pools whose nodes carry labels a labeler applied (managed-labels annotation) while no NodePoolLabelSet of the pool is read: " +
			"their unlabelled nodes are held (LabelSetNotVisible).",
		StabilityLevel: metrics.ALPHA,
	})

	// rejections holds one resolved counter per cause, so Filter does no label lookup.
	rejections = map[pool.Cause]metrics.CounterMetric{}

	registerOnce sync.Once
)

// ReasonLabel is the metric label value of a cause: stable and short, unlike the message.
func ReasonLabel(c pool.Cause) string {
	switch c {
	case pool.UnknownPool:
		return "unknown_pool"
	case pool.MalformedAnnotation:
		return "malformed_annotation"
	case pool.LabelsNotApplied:
		return "labels_not_applied"
	case pool.StaleLabel:
		return "stale_label"
	case pool.MissingRequiredLabel:
		return "missing_required_label"
	case pool.LabelSetConflict:
		return "labelset_conflict"
	case pool.LabelSetNotVisible:
		return "labelset_not_visible"
	}
	return "ready"
}

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(rejectionsTotal, labelSetProblems, lateRejections, unreadyNodes, unreadLabelSets, poolsNotVisible)
		for _, c := range pool.Causes {
			rejections[c] = rejectionsTotal.WithLabelValues(ReasonLabel(c))
		}
	})
}

func init() {
	// Filter must find a counter even when the plugin is built without New (unit tests);
	// unregistered metrics are no-ops until registerMetrics runs and re-resolves them.
	for _, c := range pool.Causes {
		rejections[c] = rejectionsTotal.WithLabelValues(ReasonLabel(c))
	}
}
