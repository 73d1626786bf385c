package systempoolguard

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// PreFilter classifies the pod once: system pods may use any node, so their Filter is skipped.
func (pl *SystemPoolGuard) PreFilter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if pl.policy.IsSystemPod(pod) || pl.policy.ExcludedByAffinity(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.compact()
	return nil, nil
}

// PreFilterExtensions returns nil: the verdict does not depend on other pods.
func (pl *SystemPoolGuard) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects system nodes for user pods (PreFilter skipped system pods). Unresolvable:
// preempting pods cannot turn a system node into a user node.
func (pl *SystemPoolGuard) Filter(ctx context.Context, _ fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	reason := pl.classify(node)
	if reason == pool.NotSystemNode {
		return nil
	}
	rejections[reason].Inc()
	if l := klog.FromContext(ctx).V(4); l.Enabled() {
		l.Info("User pod refused on a system node", "plugin", Name, "node", node.Name, "by", reasonLabel(reason))
	}
	// A new Status per rejection: the framework writes the plugin name into it from the parallel
	// Filter goroutines, so a shared one would be a data race.
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonSystemPool).WithPlugin(Name)
}
