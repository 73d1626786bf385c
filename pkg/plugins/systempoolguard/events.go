package systempoolguard

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// EventsToRegister returns what can let a refused user pod in: a user node appearing (added, or
// relabelled out of the system pool), or the pod itself gaining a system toleration.
func (pl *SystemPoolGuard) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.UpdatePodToleration}, QueueingHintFn: pl.isSchedulableAfterPodChange},
	}, nil
}

func (pl *SystemPoolGuard) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if pl.policy.ClassifyNode(newNode.Labels) != pool.NotSystemNode {
		return fwk.QueueSkip, nil
	}
	if oldNode != nil && pl.policy.ClassifyNode(oldNode.Labels) == pool.NotSystemNode {
		// Already a user node: this plugin did not refuse the pod there.
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("A user node is available", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.Queue, nil
}

func (pl *SystemPoolGuard) isSchedulableAfterPodChange(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if newPod.UID != pod.UID || !pl.policy.IsSystemPod(newPod) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
