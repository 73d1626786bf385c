package nodepoolaffinity

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// candidates returns the nodes of the pools the pod is pinned to: the smallest of the sets its
// pins allow (each is a superset of the nodes NodeAffinity accepts, so any one is exact enough
// and the smallest saves the most). nil means "do not narrow": the pod is pinned to no pool, or
// its pins allow no node at all (NodeAffinity's own Filter then explains why, where a narrowed
// search would only say "didn't satisfy plugin NodePoolAffinity"), or every node.
func (pl *NodePoolAffinity) candidates(pod *v1.Pod) sets.Set[string] {
	pins := pool.PinsOf(pod, pl.keys)
	if pins.Empty() {
		return nil
	}
	list, err := pl.nodes.List()
	if err != nil {
		return nil
	}
	x := pl.index
	x.mu.Lock()
	defer x.mu.Unlock()
	x.sync(list)
	best, bestSize := pool.Pin{}, -1
	for _, p := range pins.Selector {
		if n := x.size(p); bestSize < 0 || n < bestSize {
			best, bestSize = p, n
		}
	}
	// The terms are ORed: their union is the superset; taken when smaller than any selector pin.
	termsSize := 0
	for _, p := range pins.Terms {
		termsSize += x.size(p)
	}
	if len(pins.Terms) > 0 && (bestSize < 0 || termsSize < bestSize) {
		if termsSize == 0 || termsSize >= len(list) {
			return nil
		}
		if len(pins.Terms) == 1 {
			return x.nodesOf(pins.Terms[0])
		}
		out := sets.New[string]()
		for _, p := range pins.Terms {
			for name := range x.nodesOf(p) {
				out.Insert(name)
			}
		}
		return out
	}
	if bestSize <= 0 || bestSize >= len(list) {
		return nil
	}
	return x.nodesOf(best)
}
