package domainlabeler

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	domainLabelings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pool_labeler_domain_labelings_total",
		Help: "Domain-mode attempts to label the node, by result (labelled, unchanged, not_azure, metadata_unreachable, error).",
	}, []string{"result"})
	// No labels, so no series until the domain mode knows: a node that is not an Azure VM never
	// shows 0 (an alert on == 0 means "an Azure node whose labeler cannot reach the endpoint").
	domainMetadataReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pool_labeler_domain_metadata_reachable",
		Help: "1 once the domain labeler read the instance metadata endpoint, 0 while it cannot reach it on an Azure node (spec.providerID azure://); absent on other nodes.",
	}, nil)
)

func init() {
	ctrlmetrics.Registry.MustRegister(domainLabelings, domainMetadataReachable)
}
