// Package maintenance reads AKS and autoscaler maintenance off nodes: what a node runs
// (Generation: kubelet version and node image, by Flavour), which pools are upgrading
// (Rollouts, fed node events, and its immutable RolloutView), and what the maintenance under
// way will do to a node (Fate: Stays, Surge or Leaving, from upgrades, cordons, autoscaler
// taints and KEP-5683 lifecycle conditions). DomainSpread scores by it, the spread keeper
// rebalances around it, and the placement report and simulator measure it; docs/maintenance.md
// has the sources. It reads a node's pool with pkg/pool's Identity and nothing else of ours.
package maintenance
