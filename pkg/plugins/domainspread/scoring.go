package domainspread

import (
	"context"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const preScoreStateKey fwk.StateKey = "PreScore" + Name

// Each dimension's count takes countBits bits of the raw score, the first dimension the highest,
// so comparing raw scores compares the counts dimension by dimension. Counts saturate at
// maxCount; with at most 4 dimensions the raw score fits in an int64. With cell layering (see
// scoreState.cells) the raw score holds two more components, each of rawBits/components bits.
const (
	countBits = 15
	maxCount  = 1<<countBits - 1
	rawBits   = 60
)

// scoreState is the cycle's counts plus, per dimension, the count that stands in for nodes
// lacking the dimension's keys: the least loaded domain among the nodes being scored, so such
// nodes are neither favoured nor penalised on that dimension. Most clusters label every node,
// so that stand-in is computed only when Score first meets such a node.
type scoreState struct {
	*spreadState
	nodes       []fwk.NodeInfo
	ignoredOnce sync.Once
	ignored     [validation.MaxSpreadDimensions]int32

	// Cell layering, with three or more dimensions whose second is not joint: the first two
	// dimensions are scored on their own, so replicas can pile up in one (zone, update domain)
	// cell while another cell of the same zone holds fewer, with every zone and update domain
	// balanced: a cell of 2 hosts then gets 3 replicas and a host is doubled while another is
	// empty (a third of 18-replica bursts on 3 zones x 3 update domains x 2 hosts). So, after
	// the first two dimensions and before the rest, a node scores the replicas of its cell,
	// then prefers the cell diagonal (update-domain ID minus zone ID, modulo the update domains
	// known) that holds the most replicas: the diagonal being filled is a set of cells with
	// distinct zones and update domains, so filling diagonal by diagonal keeps zones, update
	// domains and cells balanced at every replica count.
	layered bool
	cells   map[[2]int32]int32
	diags   []int32
	bits    int

	// rollout is the pools' upgrade state for the cycle; while a pool upgrades, a node the
	// upgrade will drain (an old generation, a surge node, one marked for removal) scores below
	// a node that stays and holds fewer than its share of the workload, after the first
	// dimension: the replica keeps its zone and moves once, and the few nodes upgraded first do
	// not pile up a workload's replicas. Upgrades only: holding counts the workload's replicas per
	// node, zoneNodes the scored nodes per domain of the first dimension.
	rollout   *maintenance.RolloutView
	holding   map[string]int32
	zoneNodes map[int32]int32
	// Before every dimension while a pool upgrades: a node that stays, holds fewer than its share
	// and whose first-dimension domain's staying nodes hold fewer than endShare replicas (the
	// workload over the domains, rounded down) comes first (settles). The replica then moves
	// once, even when the least loaded domain has no upgraded node yet (a 12-node pool drained
	// two at a time), and no domain ends the upgrade above its share: the replicas on nodes that
	// leave are placed again later, by the strict order once the room is used. staying counts
	// the replicas on nodes that stay, per domain of the first dimension.
	staying  map[int32]int32
	endShare int32
}

// Clone shares the state: scoring does not change it.
func (s *scoreState) Clone() fwk.StateData { return s }

// PreScore counts the workload's replicas per domain once for the cycle, reusing PreFilter's counts
// in Hard mode. Pods without a workload are not scored, nor are the first replicas of one: with
// no replica placed every node would get the same score.
func (pl *DomainSpread) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	w, ok := pl.workloadToSpread(pod)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	s, err := readState(state)
	if err != nil {
		if s, err = pl.countReplicas(ctx, pod, w, false); err != nil {
			return fwk.AsStatus(fmt.Errorf("%s: counting replicas: %w", Name, err))
		}
	}
	if s.counted == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	ss := &scoreState{spreadState: s, nodes: nodes, bits: countBits, rollout: pl.rollouts.View()}
	if ss.rollout.Upgrading() {
		pl.countUpgrade(ss)
	}
	if pl.layered() {
		pl.countCells(ss)
	}
	state.Write(preScoreStateKey, ss)
	return nil
}

// countUpgrade fills the upgrade's counts (see scoreState) once per cycle: O(scored nodes + nodes
// holding the workload's replicas), only while a pool upgrades.
func (pl *DomainSpread) countUpgrade(s *scoreState) {
	s.holding, s.zoneNodes, s.staying = map[string]int32{}, map[int32]int32{}, map[int32]int32{}
	pl.replicas.each(s.workload, func(node string, n int32) { s.holding[node] = n })
	for _, ni := range s.nodes {
		if id := pl.domainIDs(ni.Node(), s.epoch)[0]; id != noDomain {
			s.zoneNodes[id]++
		}
	}
	if len(s.zoneNodes) == 0 {
		return
	}
	s.endShare = (s.counted + 1) / int32(len(s.zoneNodes))
	nodeInfos := pl.sharedLister.NodeInfos()
	for name, n := range s.holding {
		ni, err := nodeInfos.Get(name)
		if err != nil || ni.Node() == nil || s.rollout.FateOf(pool.Identity{}, ni.Node()) != maintenance.Stays {
			continue
		}
		if id := pl.domainIDs(ni.Node(), s.epoch)[0]; id != noDomain {
			s.staying[id] += n
		}
	}
}

// layered reports whether the dimensions get cell layering (see scoreState).
func (pl *DomainSpread) layered() bool {
	return len(pl.dims) >= 3 && !pl.dims[1].joint
}

// countCells counts the workload's replicas per cell of the first two dimensions and per cell
// diagonal, once per cycle, from the replica index (O(nodes holding replicas)).
func (pl *DomainSpread) countCells(s *scoreState) {
	s.layered = true
	s.bits = rawBits / (len(pl.dims) + 2)
	s.cells = map[[2]int32]int32{}
	// The diagonals' count (the update domains known) should not change between the cycles of
	// a burst: the node handler numbers every node's domains as it joins (numberDomains), so it
	// is every update domain seen since the table's last renumbering, whichever nodes a cycle
	// scores, with no lookup per scored node here on the scheduling goroutine. It still grows
	// when a node brings a new update domain (diagonalFill covers the cycle that meets it first).
	s.diags = make([]int32, max(pl.domains.len(1), 1))
	nodeInfos := pl.sharedLister.NodeInfos()
	pl.replicas.each(s.workload, func(nodeName string, replicas int32) {
		ni, err := nodeInfos.Get(nodeName)
		if err != nil || ni.Node() == nil {
			return
		}
		ids := pl.domainIDs(ni.Node(), s.epoch)
		if ids[0] == noDomain || ids[1] == noDomain {
			return
		}
		s.cells[[2]int32{ids[0], ids[1]}] += replicas
		s.diags[s.diagonal(ids)] += replicas
	})
}

// diagonal is the cell diagonal of a node with both of the first two dimensions.
func (s *scoreState) diagonal(ids nodeDomains) int {
	n := int32(len(s.diags))
	return int(((ids[1]-ids[0])%n + n) % n)
}

// diagonalFill is the replicas on the node's cell diagonal; 0 for a node lacking either of the
// first two dimensions, and for one whose update domain was numbered after countCells sized the
// diagonals (its node joined the snapshot before the node handler numbered it): modulo a count
// that lacks its update domain it would land on another domain's diagonal.
func (s *scoreState) diagonalFill(ids nodeDomains) int32 {
	if ids[0] == noDomain || ids[1] == noDomain || int(ids[1]) >= len(s.diags) {
		return 0
	}
	return s.diags[s.diagonal(ids)]
}

// ignoredCount returns the count that stands in for dimension d on a node lacking its keys.
func (pl *DomainSpread) ignoredCount(s *scoreState, d int) int32 {
	s.ignoredOnce.Do(func() {
		var seen [validation.MaxSpreadDimensions]bool
		for _, ni := range s.nodes {
			ids := pl.domainIDs(ni.Node(), s.epoch)
			for d := range pl.dims {
				if ids[d] == noDomain {
					continue
				}
				if c := s.inDomain(d, ids[d]); !seen[d] || c < s.ignored[d] {
					s.ignored[d], seen[d] = c, true
				}
			}
		}
	})
	return s.ignored[d]
}

// Score returns a raw score, lower is better: while a pool upgrades, whether the node settles
// the replica (settles), then the replicas in the node's domain of each dimension, most
// significant first. A dimension whose keys the node lacks is ignored: it counts
// as the least loaded domain among the scored nodes.
func (pl *DomainSpread) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	c, err := state.Read(preScoreStateKey)
	if err != nil {
		return 0, fwk.AsStatus(fmt.Errorf("%s: reading cycle state: %w", Name, err))
	}
	s := c.(*scoreState)
	ids := pl.domainIDs(nodeInfo.Node(), s.epoch)
	limit := int32(1)<<s.bits - 1
	// moves reads the node's fate once for both components that use it.
	fate := pl.moves(s, ids, nodeInfo.Node())
	raw := s.settles(ids, fate)
	for d := range pl.dims {
		var n int32
		if ids[d] != noDomain {
			n = s.inDomain(d, ids[d])
		} else {
			n = pl.ignoredCount(s, d)
		}
		raw = raw<<s.bits | int64(min(n, limit))
		if d == 0 {
			raw = raw<<fateBits | fate
		}
		if d == 1 && s.layered {
			// The cell's replicas, then the most filled diagonal first; a node lacking either
			// of the first two dimensions scores as an empty cell on an empty diagonal.
			var cell int32
			if ids[0] != noDomain && ids[1] != noDomain {
				cell = s.cells[[2]int32{ids[0], ids[1]}]
			}
			fill := s.diagonalFill(ids)
			raw = raw<<s.bits | int64(min(cell, limit))
			raw = raw<<s.bits | int64(limit-min(fill, limit))
		}
	}
	return raw, nil
}

// fateBits holds moves' result in the raw score, below settles' bit (within the 63 bits:
// rawBits plus these plus one).
const fateBits = 2

// settles is 0 while a pool upgrades for a node that stays, holds fewer than its share and
// whose first-dimension domain's staying nodes hold fewer than endShare (see scoreState), else
// 1; 0 for every node outside upgrades, and while no zone has an end share yet (fewer replicas
// than zones), when the strict order alone decides. fate is moves' result for the node. The raw
// score then takes 1 + rawBits + fateBits = 63 bits at most (TestRawScoreBits): no room for
// another component.
func (s *scoreState) settles(ids nodeDomains, fate int64) int64 {
	switch {
	case s.holding == nil || s.endShare == 0:
		return 0
	case ids[0] != noDomain && s.staying[ids[0]] >= s.endShare:
		return 1
	}
	// A node without the zone's keys has no share to exceed: whether it stays decides, as for
	// a zone with room (neither favoured nor penalised on the zone).
	return fate
}

// moves is 0 for a node maintenance under way leaves in place and that holds fewer replicas of
// the workload than its share (the replicas of its first-dimension domain, this one included,
// over that domain's scored nodes, rounded up), else 1: a node its pool's upgrade drains again
// (an older generation or a surge node), one marked for removal, or a node that stays but holds
// its share already (early in an upgrade few nodes are upgraded: preferring them regardless
// would pile a workload's replicas on them for good). Outside upgrades it only reads the
// node's taints and lifecycle conditions.
func (pl *DomainSpread) moves(s *scoreState, ids nodeDomains, node *v1.Node) int64 {
	// Outside upgrades (holding is nil) an untainted, schedulable node stays unless a node
	// carries a lifecycle condition: the common case costs three field reads.
	if s.holding == nil && len(node.Spec.Taints) == 0 && !node.Spec.Unschedulable && !s.rollout.InLifecycle() {
		return 0
	}
	if s.rollout.FateOf(pool.Identity{}, node) != maintenance.Stays {
		return 1
	}
	if s.holding == nil {
		return 0
	}
	share := int32(1)
	if ids[0] != noDomain {
		if n := s.zoneNodes[ids[0]]; n > 0 {
			share = (s.inDomain(0, ids[0]) + n) / n // ceil((replicas+1)/n)
		}
	}
	if s.holding[node.Name] < share {
		return 0
	}
	return 1
}

// ScoreExtensions returns the plugin: raw scores need normalising.
func (pl *DomainSpread) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps raw scores by rank: the lowest raw score (fewest replicas, dimension by
// dimension) gets MaxNodeScore, every other one at most half of it, falling with its rank. The
// gap keeps the spread decisive against the other plugins' resource scores, and ranks keep the
// order of later dimensions, which a linear scale would round away.
func (pl *DomainSpread) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	distinct := distinctSorted(scores)
	if len(distinct) == 1 {
		for i := range scores {
			scores[i].Score = framework.MaxNodeScore
		}
		return nil
	}
	last := int64(len(distinct) - 1)
	for i := range scores {
		rank := int64(sort.Search(len(distinct), func(j int) bool { return distinct[j] >= scores[i].Score }))
		if rank == 0 {
			scores[i].Score = framework.MaxNodeScore
			continue
		}
		scores[i].Score = framework.MaxNodeScore / 2 * (last - rank) / last
	}
	return nil
}

// distinctSorted returns the distinct raw scores in ascending order. They are few (replica
// counts are small), so a linear insert beats sorting every node's score.
func distinctSorted(scores framework.NodeScoreList) []int64 {
	distinct := make([]int64, 0, 16)
	for _, s := range scores {
		i := sort.Search(len(distinct), func(j int) bool { return distinct[j] >= s.Score })
		if i < len(distinct) && distinct[i] == s.Score {
			continue
		}
		distinct = append(distinct, 0)
		copy(distinct[i+1:], distinct[i:])
		distinct[i] = s.Score
	}
	return distinct
}
