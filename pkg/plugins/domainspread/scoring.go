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
)

const preScoreStateKey fwk.StateKey = "PreScore" + Name

// Each dimension's count takes countBits bits of the raw score, the first dimension the highest,
// so comparing raw scores compares the counts dimension by dimension. Counts saturate at
// maxCount; with at most 4 dimensions the raw score fits in an int64.
const (
	countBits = 15
	maxCount  = 1<<countBits - 1
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
	state.Write(preScoreStateKey, &scoreState{spreadState: s, nodes: nodes})
	return nil
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

// Score returns a raw score, lower is better: the replicas in the node's domain of each
// dimension, most significant first. A dimension whose keys the node lacks is ignored: it counts
// as the least loaded domain among the scored nodes.
func (pl *DomainSpread) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	c, err := state.Read(preScoreStateKey)
	if err != nil {
		return 0, fwk.AsStatus(fmt.Errorf("%s: reading cycle state: %w", Name, err))
	}
	s := c.(*scoreState)
	ids := pl.domainIDs(nodeInfo.Node(), s.epoch)
	var raw int64
	for d := range pl.dims {
		var n int32
		if ids[d] != noDomain {
			n = s.inDomain(d, ids[d])
		} else {
			n = pl.ignoredCount(s, d)
		}
		raw = raw<<countBits | int64(min(n, maxCount))
	}
	return raw, nil
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
