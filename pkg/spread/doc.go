// Package spread is what the DomainSpread plugin, the spread keeper and the placement report
// must agree on about a workload's replicas across domains: how uneven they are (Skew), and the
// pod-deletion-cost annotation by which the ReplicaSet controller picks the replicas a
// scale-down removes (DeletionCostAnnotation, DeletionCostOf, NextDeletionCost, ...).
//
// It is a package of its own because its readers are a plugin and a controller: a plugin may
// import no controller and no controller imports a plugin, so the rule has to sit in a room
// both have a door to. pkg/pool is such a room, but it answers questions about nodes and their
// pools, not about replicas. It imports nothing of ours.
package spread
