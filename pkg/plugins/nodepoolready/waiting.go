package nodepoolready

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// maxWaiting bounds the pods remembered between NodePoolLabelSet changes; beyond it the oldest
// are forgotten and rely on the scheduler's periodic flush.
const maxWaiting = 10000

// waitingPods remembers the pods that found no node, for two retries the queueing hints cannot
// give:
//   - a NodePoolLabelSet change seen by the plugin's own informer: the hint covers changes the
//     scheduler's informer delivers while pods wait; this covers the other order, when the
//     scheduler saw the change (and had no pod to requeue) before the plugin's informer did;
//   - a node becoming ready, for pods this plugin did not reject: a pod refused by NodeAffinity
//     or NodeResourcesFit before the node even joined is requeued by their hints only after its
//     backoff (up to 10 s). Activating it when the node becomes ready keeps the promise that
//     pods bind within a second of their node's labels landing.
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

// take removes and returns the remembered pods for which use is true.
func (w *waitingPods) take(use func(*v1.Pod) bool) map[string]*v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out map[string]*v1.Pod
	for key, pod := range w.pods {
		if use(pod) {
			if out == nil {
				out = map[string]*v1.Pod{}
			}
			out[key] = pod
			delete(w.pods, key)
		}
	}
	return out
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

// activateForNode moves the remembered pods whose required node affinity admits node, which has
// just become ready, back to the active queue, skipping their backoff. Pods that are no longer
// pending are not in the queue, so activating them does nothing.
func (pl *NodePoolReady) activateForNode(logger klog.Logger, node *v1.Node) {
	if pl.handle == nil {
		return
	}
	pods := pl.waiting.take(func(pod *v1.Pod) bool {
		match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
		return match
	})
	if len(pods) > 0 {
		logger.V(4).Info("Node became ready, retrying waiting pods", "plugin", Name, "node", klog.KObj(node), "pods", len(pods))
		pl.handle.Activate(logger, pods)
	}
}

// ready reports whether the node is ready by the current label sets.
func (pl *NodePoolReady) ready(node *v1.Node) bool {
	return pl.gate.Check(node.Labels, node.Annotations, pl.labelSets.current()).Ready()
}

// nodeReadyHandler activates waiting pods when a node is added ready or becomes ready.
func (pl *NodePoolReady) nodeReadyHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if node, ok := obj.(*v1.Node); ok && pl.ready(node) {
				pl.activateForNode(logger, node)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldNode, ok1 := oldObj.(*v1.Node)
			node, ok2 := newObj.(*v1.Node)
			if ok1 && ok2 && !pl.ready(oldNode) && pl.ready(node) {
				pl.activateForNode(logger, node)
			}
		},
	}
}
