package nodepoolready

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const preFilterStateKey fwk.StateKey = "PreFilter" + Name

// preFilterState pins the label sets for the whole cycle, so every node is judged against one view.
type preFilterState struct {
	labelSets *pool.LabelSets
}

// Clone shares the state: it is immutable.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter pins the current label-set index into the cycle state, or skips pods that are exempt.
func (pl *NodePoolReady) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if pl.ignoreDaemonSetPods && isExempt(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if pl.snapshot != nil {
		pl.verdicts.Compact(pl.snapshot)
	}
	state.Write(preFilterStateKey, &preFilterState{labelSets: pl.labelSets.current()})
	return nil, nil
}

// PreFilterExtensions returns nil: readiness does not depend on other pods.
func (pl *NodePoolReady) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects nodes that are not ready, with the code Pending: such a node waits for its
// labeler, not for anything preemption could change (see the README). A node is judged once per
// version of the node and of the label sets (pl.verdicts); no allocation per node unless the
// node changed.
func (pl *NodePoolReady) Filter(ctx context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getPreFilterState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	v := pl.verdicts.Get(node, s.labelSets)
	if v == nil {
		return nil
	}
	rejections[v.Cause].Inc()
	logDetail(klog.FromContext(ctx), node.Name, *v)
	// A new Status per rejection: the framework writes the plugin name into the returned status,
	// from the parallel Filter goroutines, so a shared one would be a data race.
	return fwk.NewStatus(fwk.Pending, v.Cause.String()).WithPlugin(Name)
}

func getPreFilterState(state fwk.CycleState) (*preFilterState, error) {
	c, err := state.Read(preFilterStateKey)
	if err != nil {
		return nil, err
	}
	return c.(*preFilterState), nil
}

func isExempt(pod *v1.Pod) bool { return pool.IsDaemonSetPod(pod) }
