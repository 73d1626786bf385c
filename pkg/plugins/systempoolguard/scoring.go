package systempoolguard

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// PreScore skips user pods: Filter already keeps them off system nodes, so there is nothing to prefer.
func (pl *SystemPoolGuard) PreScore(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if !pl.policy.IsSystemPod(pod) {
		return fwk.NewStatus(fwk.Skip)
	}
	pl.compact()
	return nil
}

// Score gives system pods MaxNodeScore on system nodes and 0 elsewhere (already normalised).
func (pl *SystemPoolGuard) Score(_ context.Context, _ fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	if pl.classify(nodeInfo.Node()) != pool.NotSystemNode {
		return framework.MaxNodeScore, nil
	}
	return 0, nil
}

// ScoreExtensions returns nil: scores are 0 or MaxNodeScore already.
func (pl *SystemPoolGuard) ScoreExtensions() framework.ScoreExtensions { return nil }
