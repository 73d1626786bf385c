// Package spreadkeeper keeps a workload's spread through scale-downs: it keeps the pod-deletion
// cost annotation of every replica DomainSpread spreads such that the ReplicaSet controller,
// scaling down, removes replicas from the most crowded domains first, dimension by dimension
// (the deletion-cost keeper); and it repairs spread lost anyway by evicting one replica at a time
// (the rebalancer).
package spreadkeeper

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// Replica is one bound replica of a workload: where it sits and what deletion cost it carries.
type Replica struct {
	// Name orders replicas that are alike (the younger first: Created is larger).
	Name    string
	Created int64
	// Domains holds the replica's domain per dimension (DomainSpread's dimensions, in order);
	// "" where its node lacks the dimension's keys. The last dimension is typically the host.
	Domains []string
	// Cost is the deletion cost the pod carries; HasCost is false without the annotation (the
	// ReplicaSet controller then reads 0).
	Cost    int32
	HasCost bool
}

// searchBudget bounds the states RemovalOrder explores before it settles for the greedy order.
const searchBudget = 20000

// RemovalOrder returns the indexes of replicas in the order a scale-down should remove them:
// each removal leaves every dimension's skew (the most minus the fewest replicas of the domains
// the workload occupies now) no higher than it was, and at most 1 where that is reachable;
// among such removals, the replica in the most crowded domains, dimension by dimension, goes
// first. It searches (depth first, dead states remembered) for an order whose every prefix keeps
// that bound, because the greedy choice can strand a crowded zone whose replicas all sit in an
// update domain that is not crowded; past searchBudget states it completes the order greedily.
func RemovalOrder(replicas []Replica, dims int) []int {
	o := newOrdering(replicas, dims)
	order := make([]int, 0, len(replicas))
	budget := searchBudget
	if !o.search(&order, &budget) {
		order = order[:0]
		o.reset(replicas)
		for range replicas {
			cands := o.candidates()
			o.take(cands[0])
			order = append(order, cands[0])
		}
	}
	return order
}

// Holds reports whether the costs the replicas carry already give an order RemovalOrder would
// accept: every replica has a cost of its own (no two alike, so the ReplicaSet controller's
// later criteria never decide), and removing them cheapest first keeps every prefix within the
// bound. DomainSpread's bindings give costs in placement order, whose reverse passes back
// through the states the placements built, so after a scale-up or a scale-down the keeper
// usually has nothing to write.
func Holds(replicas []Replica, dims int) bool {
	order := make([]int, len(replicas))
	for i, r := range replicas {
		if !r.HasCost {
			return false
		}
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(replicas[a].Cost, replicas[b].Cost) })
	for i := 1; i < len(order); i++ {
		if replicas[order[i]].Cost == replicas[order[i-1]].Cost {
			return false
		}
	}
	o := newOrdering(replicas, dims)
	for _, i := range order {
		o.take(i)
		if !o.withinBound() {
			return false
		}
	}
	return true
}

// ordering is the search's state: the replicas left and their counts per domain.
type ordering struct {
	replicas []Replica
	dims     int
	// ids[i][d] is replica i's domain ID in dimension d (-1: none); counts[d][id] the replicas
	// left there; domains[d] the IDs of the domains that held replicas at the start.
	ids    [][]int
	counts [][]int
	left   []bool
	nLeft  int
	// bound[d] is the skew every state must keep on dimension d.
	bound []int
	// pos[i] numbers replica i's position (its domains in every dimension); posLeft counts the
	// replicas left per position: the state the dead-state memo is keyed by.
	pos     []int
	posLeft []int
	dead    map[string]bool
}

func newOrdering(replicas []Replica, dims int) *ordering {
	o := &ordering{replicas: replicas, dims: dims, ids: make([][]int, len(replicas)), counts: make([][]int, dims), bound: make([]int, dims), dead: map[string]bool{}}
	index := make([]map[string]int, dims)
	for d := range index {
		index[d] = map[string]int{}
	}
	for i, r := range replicas {
		o.ids[i] = make([]int, dims)
		for d := 0; d < dims; d++ {
			o.ids[i][d] = -1
			if d < len(r.Domains) && r.Domains[d] != "" {
				id, ok := index[d][r.Domains[d]]
				if !ok {
					id = len(index[d])
					index[d][r.Domains[d]] = id
				}
				o.ids[i][d] = id
			}
		}
	}
	for d := range o.counts {
		o.counts[d] = make([]int, len(index[d]))
	}
	positions := map[string]int{}
	o.pos = make([]int, len(replicas))
	for i := range replicas {
		key := fmt.Sprint(o.ids[i])
		id, ok := positions[key]
		if !ok {
			id = len(positions)
			positions[key] = id
		}
		o.pos[i] = id
	}
	o.posLeft = make([]int, len(positions))
	o.reset(replicas)
	for d := range o.bound {
		o.bound[d] = max(o.skew(d), 1)
	}
	return o
}

func (o *ordering) reset(replicas []Replica) {
	o.left = make([]bool, len(replicas))
	o.nLeft = len(replicas)
	for d := range o.counts {
		clear(o.counts[d])
	}
	clear(o.posLeft)
	for i := range replicas {
		o.left[i] = true
		o.posLeft[o.pos[i]]++
		for d, id := range o.ids[i] {
			if id >= 0 {
				o.counts[d][id]++
			}
		}
	}
}

func (o *ordering) skew(d int) int {
	if len(o.counts[d]) == 0 {
		return 0
	}
	return slices.Max(o.counts[d]) - slices.Min(o.counts[d])
}

func (o *ordering) take(i int) {
	o.left[i] = false
	o.nLeft--
	o.posLeft[o.pos[i]]--
	for d, id := range o.ids[i] {
		if id >= 0 {
			o.counts[d][id]--
		}
	}
}

func (o *ordering) put(i int) {
	o.left[i] = true
	o.nLeft++
	o.posLeft[o.pos[i]]++
	for d, id := range o.ids[i] {
		if id >= 0 {
			o.counts[d][id]++
		}
	}
}

// candidates returns the replicas left, one per distinct position (replicas alike in every
// dimension are interchangeable: the younger stands for them), the most crowded first.
func (o *ordering) candidates() []int {
	var out []int
	seen := map[int]int{}
	for i := range o.replicas {
		if !o.left[i] {
			continue
		}
		key := o.pos[i]
		if j, ok := seen[key]; ok {
			if o.younger(i, out[j]) {
				out[j] = i
			}
			continue
		}
		seen[key] = len(out)
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b int) int {
		for d := 0; d < o.dims; d++ {
			if ca, cb := o.countAt(a, d), o.countAt(b, d); ca != cb {
				return cb - ca
			}
		}
		if o.younger(a, b) {
			return -1
		}
		return 1
	})
	return out
}

func (o *ordering) countAt(i, d int) int {
	if id := o.ids[i][d]; id >= 0 {
		return o.counts[d][id]
	}
	return 0
}

// younger orders alike replicas: the newer first (as the ReplicaSet controller would), then by name.
func (o *ordering) younger(a, b int) bool {
	ra, rb := o.replicas[a], o.replicas[b]
	if ra.Created != rb.Created {
		return ra.Created > rb.Created
	}
	return ra.Name < rb.Name
}

func (o *ordering) withinBound() bool {
	for d := 0; d < o.dims; d++ {
		if o.skew(d) > o.bound[d] {
			return false
		}
	}
	return true
}

func (o *ordering) stateKey() string {
	var b strings.Builder
	for _, c := range o.posLeft {
		b.WriteString(strconv.Itoa(c))
		b.WriteByte(',')
	}
	return b.String()
}

// search extends order until every replica is in it, each state within the bound; false when no
// such order exists from here or the budget ran out.
func (o *ordering) search(order *[]int, budget *int) bool {
	if o.nLeft == 0 {
		return true
	}
	if *budget <= 0 {
		return false
	}
	*budget--
	key := o.stateKey()
	if o.dead[key] {
		return false
	}
	for _, i := range o.candidates() {
		o.take(i)
		if o.withinBound() {
			*order = append(*order, i)
			if o.search(order, budget) {
				return true
			}
			*order = (*order)[:len(*order)-1]
		}
		o.put(i)
		if *budget <= 0 {
			return false
		}
	}
	o.dead[key] = true
	return false
}

// AssignCosts returns, for replicas in removal order (order from RemovalOrder), the deletion cost
// each should carry so that costs rise strictly along the order, changing as few of the costs
// the pods already carry as it can: the longest run of present costs that already rises is
// kept, and the others are placed between their kept neighbours (or renumbered spread.DeletionCostStep apart
// when no room is left). changed[i] reports whether replica i's cost must be written.
func AssignCosts(replicas []Replica, order []int) (costs []int32, changed []bool) {
	n := len(order)
	costs = make([]int32, len(replicas))
	changed = make([]bool, len(replicas))
	keep := longestRising(replicas, order)
	// Fill each gap between kept costs.
	prev := -1 // position in order of the previous kept replica
	for pos := 0; pos <= n; pos++ {
		if pos < n && !keep[pos] {
			continue
		}
		if !fillGap(replicas, order, keep, prev, pos, costs) {
			return renumber(replicas, order)
		}
		if pos < n {
			costs[order[pos]] = replicas[order[pos]].Cost
		}
		prev = pos
	}
	for i, r := range replicas {
		changed[i] = !r.HasCost || r.Cost != costs[i]
	}
	return costs, changed
}

// fillGap gives the replicas at order positions lo+1..hi-1 rising costs strictly between the kept
// costs at lo and hi (-1 and len(order): no bound on that side); false if they do not fit.
func fillGap(replicas []Replica, order []int, keep []bool, lo, hi int, costs []int32) bool {
	k := hi - lo - 1
	if k == 0 {
		return true
	}
	var low, high int64 = -1 << 31, 1<<31 - 1
	hasLow, hasHigh := lo >= 0, hi < len(order)
	if hasLow {
		low = int64(replicas[order[lo]].Cost)
	}
	if hasHigh {
		high = int64(replicas[order[hi]].Cost)
	}
	var at func(j int) int64
	switch {
	case hasLow && hasHigh:
		if high-low <= int64(k) {
			return false
		}
		step := (high - low) / int64(k+1)
		at = func(j int) int64 { return low + step*int64(j+1) }
	case hasLow:
		at = func(j int) int64 { return low + spread.DeletionCostStep*int64(j+1) }
	case hasHigh:
		at = func(j int) int64 { return high - spread.DeletionCostStep*int64(k-j) }
	default:
		at = func(j int) int64 { return spread.DeletionCostStep * int64(j) }
	}
	for j := 0; j < k; j++ {
		v := at(j)
		if v <= -1<<31 || v >= 1<<31-1 {
			return false
		}
		costs[order[lo+1+j]] = int32(v)
	}
	return true
}

func renumber(replicas []Replica, order []int) ([]int32, []bool) {
	costs := make([]int32, len(replicas))
	changed := make([]bool, len(replicas))
	for pos, i := range order {
		costs[i] = int32(spread.DeletionCostStep * pos)
		changed[i] = !replicas[i].HasCost || replicas[i].Cost != costs[i]
	}
	return costs, changed
}

// longestRising marks the positions of order whose present costs form a longest strictly rising
// subsequence (O(n log n)).
func longestRising(replicas []Replica, order []int) []bool {
	keep := make([]bool, len(order))
	var tails []int // positions: tails[l] ends the best rising run of length l+1
	parent := make([]int, len(order))
	for pos, i := range order {
		if !replicas[i].HasCost {
			parent[pos] = -2
			continue
		}
		c := replicas[i].Cost
		l, _ := slices.BinarySearchFunc(tails, c, func(p int, c int32) int {
			switch pc := replicas[order[p]].Cost; {
			case pc < c:
				return -1
			case pc > c:
				return 1
			}
			return 0
		})
		parent[pos] = -1
		if l > 0 {
			parent[pos] = tails[l-1]
		}
		if l == len(tails) {
			tails = append(tails, pos)
		} else {
			tails[l] = pos
		}
	}
	if len(tails) == 0 {
		return keep
	}
	for pos := tails[len(tails)-1]; pos >= 0; pos = parent[pos] {
		keep[pos] = true
	}
	return keep
}
