// Package pool is the lowest room of pool-scheduler: what every part of it (the scheduler
// plugins, the labeler, the admission path, the report and the tools) reads about nodes and
// their pools, so that all of them judge a node by one rule:
//
//   - which pool a node is in (Identity, PoolOf) and which pools a pod is pinned to (Pins);
//   - whether a node's pool state is applied: the readiness Gate, the NodePoolLabelSets compiled
//     per pool (LabelSets), the managed-labels annotation, the startup taint and the
//     PoolLabelsApplied condition;
//   - whether a node is a system node and a pod a system pod (SystemPolicy), and the
//     node-selector terms that keep a pod off system nodes (AvoidSystemNodes).
//
// The Gate and the SystemPolicy are built here from the plugins' args (NewGate,
// NewSystemPolicy), for the plugins and the tools alike. Nothing else in the repository reads
// pool label keys or the managed-labels annotation directly.
//
// What is not about pools lives elsewhere: AKS and autoscaler maintenance (fates, generations,
// rollouts) in pkg/maintenance, and the skew and pod-deletion cost that DomainSpread, the
// spread keeper and the report agree on in pkg/spread.
package pool
