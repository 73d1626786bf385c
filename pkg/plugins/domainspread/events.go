package domainspread

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// EventsToRegister returns what can lower a rejected pod's skew (Hard mode): a replica of its
// workload going away, starting to terminate or landing elsewhere, or the set of eligible domains
// changing (a node added, deleted, relabelled, tainted or cordoned).
func (pl *DomainSpread) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.Delete | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
	}, nil
}

func (pl *DomainSpread) isSchedulableAfterPodChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	changed := newPod
	if changed == nil {
		changed = oldPod
	}
	w, ok := pl.workloadToSpread(pod)
	if !ok || changed.UID == pod.UID || changed.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	if of, ok := workloadOf(changed); !ok || of != w {
		return fwk.QueueSkip, nil
	}
	if oldPod != nil && newPod != nil && (oldPod.DeletionTimestamp != nil || newPod.DeletionTimestamp == nil) {
		// An update other than starting to terminate does not change the counts.
		return fwk.QueueSkip, nil
	}
	// A decision only: the replica index follows the pod informer on its own (see
	// waitingReplicas for a retry that comes before the index has the change).
	logger.V(5).Info("A replica of the workload moved", "plugin", Name, "pod", klog.KObj(pod), "replica", klog.KObj(changed))
	return fwk.Queue, nil
}

func (pl *DomainSpread) isSchedulableAfterNodeChange(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldNode == nil || newNode == nil {
		// Added or deleted: the eligible domains changed.
		return fwk.Queue, nil
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	if eligible(pod, affinity, oldNode) != eligible(pod, affinity, newNode) {
		return fwk.Queue, nil
	}
	for d := range pl.dims {
		oldKey, oldOK := pl.domainKeyOf(d, oldNode.Labels)
		if newKey, ok := pl.domainKeyOf(d, newNode.Labels); ok != oldOK || newKey != oldKey {
			return fwk.Queue, nil
		}
	}
	// Same domains, same eligibility: the verdicts did not change.
	return fwk.QueueSkip, nil
}
