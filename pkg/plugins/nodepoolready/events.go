package nodepoolready

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
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

// isSchedulableAfterNodeChange queues the pod when a node became usable for it: ready, and
// admitted by the pod's required node affinity. Both halves count: a node that turns ready but
// is excluded by the pod's affinity would only cost a cycle (the queue retries this plugin's
// Pending rejections without backoff), and a ready node whose selected label lands later must
// still wake the pod, because this plugin, filtering first, may be the only one that refused it.
func (pl *NodePoolReady) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldNode != nil && sameReadinessInputs(oldNode, newNode) {
		return fwk.QueueSkip, nil
	}
	sets := pl.labelSets.current()
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	if !pl.usable(affinity, newNode, sets) {
		logger.V(5).Info("Node is not usable for the pod", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return fwk.QueueSkip, nil
	}
	if oldNode != nil && pl.usable(affinity, oldNode, sets) {
		// It was usable already, so it is not the node that rejected the pod.
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Node became usable for the pod", "plugin", Name, "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.Queue, nil
}

// usable reports whether node is ready by sets and admitted by the pod's required affinity.
func (pl *NodePoolReady) usable(affinity nodeaffinity.RequiredNodeAffinity, node *v1.Node, sets *pool.LabelSets) bool {
	if !pl.gate.Check(node.Labels, node.Annotations, sets).Ready() {
		return false
	}
	match, _ := affinity.Match(node)
	return match
}

// isSchedulableAfterLabelSetChange queues the pod when the desired labels changed: an added set
// can make listed managed labels wanted again, a changed or deleted one can drop a label a node
// lacks. Status-only updates, such as the labeler's, are skipped. A decision only: the scheduler
// calls it once per waiting pod, and not at all when none waits, so the label-set index follows
// the plugin's own informer (see labelSetIndex for a retry that comes before it has the change).
func (pl *NodePoolReady) isSchedulableAfterLabelSetChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if newObj == nil {
		if set := asLabelSet(oldObj); set == nil || !pl.labelSets.watches(set.Namespace) {
			return fwk.QueueSkip, nil
		}
		return fwk.Queue, nil
	}
	set := asLabelSet(newObj)
	if set == nil || !pl.labelSets.watches(set.Namespace) {
		return fwk.QueueSkip, nil
	}
	if oldObj != nil {
		if old := asLabelSet(oldObj); old != nil && old.UID == set.UID && maps.Equal(old.Spec.Labels, set.Spec.Labels) &&
			(old.DeletionTimestamp == nil) == (set.DeletionTimestamp == nil) {
			return fwk.QueueSkip, nil
		}
	}
	logger.V(5).Info("NodePoolLabelSet changed", "plugin", Name, "pod", klog.KObj(pod), "labelSet", klog.KObj(set))
	return fwk.Queue, nil
}
