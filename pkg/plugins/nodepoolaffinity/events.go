package nodepoolaffinity

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// EventsToRegister returns what can add a node to a pinned pod's search: a node added, or
// relabelled into one of its pools.
func (pl *NodePoolAffinity) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod when the node now is in one of its pools and was
// not before: only then did this plugin leave it out of the pod's search.
func (pl *NodePoolAffinity) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	pins := pool.PinsOf(pod, pl.keys)
	if pins.Empty() || !pins.Allow(newNode.Labels) {
		// Unpinned: this plugin never narrowed the pod's search.
		return fwk.QueueSkip, nil
	}
	if oldNode != nil && pins.Allow(oldNode.Labels) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("A node joined the pod's pools", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.Queue, nil
}
