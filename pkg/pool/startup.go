package pool

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// StartupTaintKey is the default key of the startup taint pool-labeler's controller lifts from a
// node once its pool's labels are applied (docs/gate.md). The prefix is cluster-autoscaler's
// StartupTaintPrefix (utils/taints/taints.go), so its scale-up simulation treats the taint as
// temporary with no --startup-taints flag; Karpenter needs it listed in a NodePool's
// startupTaints.
const StartupTaintKey = "startup-taint.cluster-autoscaler.kubernetes.io/pool-labels"

// ConditionPoolLabelsApplied is the node condition pool-labeler's controller keeps on the nodes
// of pools with a NodePoolLabelSet: True once NodePoolReady's rule accepts the node.
const ConditionPoolLabelsApplied = "PoolLabelsApplied"

// StartupTaintedSince reports whether node carries a taint with key, and since when: the taint's
// TimeAdded where the API server stamped it (NoExecute), else the node's creation (a startup
// taint is registered with the node). poolctl and pool-labeler's metrics both age it this way.
func StartupTaintedSince(node *v1.Node, key string) (time.Time, bool) {
	if key == "" {
		return time.Time{}, false
	}
	for _, t := range node.Spec.Taints {
		if t.Key != key {
			continue
		}
		if t.TimeAdded != nil {
			return t.TimeAdded.Time, true
		}
		return node.CreationTimestamp.Time, true
	}
	return time.Time{}, false
}
