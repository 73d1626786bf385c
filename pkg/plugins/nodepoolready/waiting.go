package nodepoolready

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// maxWaiting bounds the pods remembered between NodePoolLabelSet changes; beyond it the oldest
// are forgotten and rely on the scheduler's periodic flush.
const maxWaiting = 10000

// waitingPods remembers the pods that found no node, so that a NodePoolLabelSet change seen by
// the plugin's own informer can retry them. The queueing hint covers changes the scheduler's
// informer delivers while pods wait; this covers the other order, when the scheduler saw the
// change (and had no pod to requeue) before the plugin's informer did.
type waitingPods struct {
	mu   sync.Mutex
	pods map[string]*v1.Pod
}

func (w *waitingPods) remember(pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods == nil || len(w.pods) >= maxWaiting {
		w.pods = map[string]*v1.Pod{}
	}
	w.pods[pod.Namespace+"/"+pod.Name] = pod
}

func (w *waitingPods) takeAll() map[string]*v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods := w.pods
	w.pods = nil
	return pods
}

// PostFilter remembers a pod no node fits; it never makes a pod schedulable itself.
func (pl *NodePoolReady) PostFilter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *fwk.Status) {
	if !(pl.ignoreDaemonSetPods && isExempt(pod)) {
		pl.waiting.remember(pod)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// activateWaiting moves the remembered pods back to the active queue.
func (pl *NodePoolReady) activateWaiting(logger klog.Logger) {
	if pl.handle == nil {
		return
	}
	if pods := pl.waiting.takeAll(); len(pods) > 0 {
		logger.V(4).Info("NodePoolLabelSets changed, retrying waiting pods", "plugin", Name, "pods", len(pods))
		pl.handle.Activate(logger, pods)
	}
}
