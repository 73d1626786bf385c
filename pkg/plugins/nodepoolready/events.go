package nodepoolready

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// EventsToRegister returns the events that can make a node ready: node labels and annotations
// (the managed-labels annotation) changing, nodes joining, and NodePoolLabelSets changing.
func (pl *NodePoolReady) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{
			Event:          fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation},
			QueueingHintFn: pl.isSchedulableAfterNodeChange,
		},
		{
			Event:          fwk.ClusterEvent{Resource: fwk.EventResource(labelsv1alpha1.EventResource), ActionType: fwk.Add | fwk.Update | fwk.Delete},
			QueueingHintFn: pl.isSchedulableAfterLabelSetChange,
		},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod when a node became ready (it was added ready, or
// it was not ready before the update and is now) and the pod's required node affinity allows it.
func (pl *NodePoolReady) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	sets := pl.labelSets.current()
	if v := pl.gate.Check(newNode.Labels, newNode.Annotations, sets); !v.Ready() {
		logger.V(5).Info("Node is still not ready", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode), "reason", v.Cause.String())
		return fwk.QueueSkip, nil
	}
	if oldNode != nil && pl.gate.Check(oldNode.Labels, oldNode.Annotations, sets).Ready() {
		// It was ready already, so it is not the node that rejected the pod.
		return fwk.QueueSkip, nil
	}
	// A pod whose required node affinity excludes the now-ready node cannot use it: retrying it
	// would only cost a cycle. (The queue retries NodePoolReady's rejections without backoff, so
	// a spurious Queue here is a whole cycle per pending pod per node that becomes ready.)
	if match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(newNode); !match {
		logger.V(5).Info("Node became ready but the pod's node affinity excludes it", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Node became ready", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.Queue, nil
}

// isSchedulableAfterLabelSetChange applies the change to the plugin's index (see labelSetIndex)
// and queues the pod when the desired labels changed: an added set can make listed managed
// labels wanted again, a changed or deleted one can drop a label a node lacks. Status-only
// updates, such as the labeler's, are skipped.
func (pl *NodePoolReady) isSchedulableAfterLabelSetChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if newObj == nil {
		set := asLabelSet(oldObj)
		if set == nil || !pl.labelSets.watches(set.Namespace) {
			return fwk.QueueSkip, nil
		}
		pl.labelSets.remove(logger, set)
		return fwk.Queue, nil
	}
	set := asLabelSet(newObj)
	if set == nil || !pl.labelSets.watches(set.Namespace) {
		return fwk.QueueSkip, nil
	}
	pl.labelSets.upsert(logger, set)
	if oldObj != nil {
		if old := asLabelSet(oldObj); old != nil && old.UID == set.UID && equalLabels(old.Spec.Labels, set.Spec.Labels) {
			return fwk.QueueSkip, nil
		}
	}
	logger.V(5).Info("NodePoolLabelSet changed", "plugin", Name, "pod", klog.KObj(pod), "labelSet", klog.KObj(set))
	return fwk.Queue, nil
}
