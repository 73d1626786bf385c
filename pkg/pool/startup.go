package pool

// StartupTaintKey is the default key of the startup taint pool-labeler's controller lifts from a
// node once its pool's labels are applied (docs/gate.md). The prefix is cluster-autoscaler's
// StartupTaintPrefix (utils/taints/taints.go), so its scale-up simulation treats the taint as
// temporary with no --startup-taints flag; Karpenter needs it listed in a NodePool's
// startupTaints.
const StartupTaintKey = "startup-taint.cluster-autoscaler.kubernetes.io/pool-labels"

// ConditionPoolLabelsApplied is the node condition pool-labeler's controller keeps on the nodes
// of pools with a NodePoolLabelSet: True once NodePoolReady's rule accepts the node.
const ConditionPoolLabelsApplied = "PoolLabelsApplied"
