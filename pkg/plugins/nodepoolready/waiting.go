package nodepoolready

import (
	"context"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// maxWaiting bounds the pods remembered between NodePoolLabelSet changes; beyond it the oldest
// are forgotten and rely on the scheduler's periodic flush.
const maxWaiting = 10000

// waitingPods remembers the pods that found no node, for two retries the queueing hints cannot
// give:
//   - a NodePoolLabelSet change seen by the plugin's own informer: the hint requeues pods when the
//     scheduler's informer delivers the change, which may be before or after the plugin's
//     informer has it (the hints do not update the index); this retries them once it has;
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

// PostFilter remembers a pod no node fits; it never makes a pod schedulable itself. If the
// label sets changed since PreFilter pinned them, the cycle judged nodes by an old view: the pod
// is activated at once (it is still in flight, so the queue requeues it when the cycle ends).
func (pl *NodePoolReady) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *fwk.Status) {
	if !(pl.ignoreDaemonSetPods && isExempt(pod)) {
		pl.waiting.remember(pod)
		// After remember: a change from here on finds the pod remembered (activateWaiting).
		if s, err := getPreFilterState(state); err == nil && s.labelSets != pl.labelSets.current() && pl.handle != nil {
			logger := klog.FromContext(ctx)
			logger.V(4).Info("NodePoolLabelSets changed during the cycle, retrying the pod", "plugin", Name, "pod", klog.KObj(pod))
			pl.handle.Activate(logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
		}
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

// activateForNode moves the remembered pods for which node became usable (ready, and admitted by
// the pod's required affinity; wasUsable says whether it was before) back to the active queue,
// skipping their backoff. Pods that are no longer pending are not in the queue, so activating
// them does nothing.
//
// This handler and the scheduler's own, which puts the node into its cache, run in separate
// goroutines in no fixed order: a pod activated before the cache has the new node version is
// refused again and starts a new backoff. So the pods are activated once more a moment later,
// by when the cache has the node; the second activation is a no-op for pods already bound.
func (pl *NodePoolReady) activateForNode(logger klog.Logger, node *v1.Node, wasUsable func(nodeaffinity.RequiredNodeAffinity) bool) {
	if pl.handle == nil {
		return
	}
	sets := pl.labelSets.current()
	pods := pl.waiting.take(func(pod *v1.Pod) bool {
		affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
		return pl.usable(affinity, node, sets) && !wasUsable(affinity)
	})
	if len(pods) == 0 {
		return
	}
	logger.V(4).Info("Node became usable, retrying waiting pods", "plugin", Name, "node", klog.KObj(node), "pods", len(pods))
	pl.handle.Activate(logger, pods)
	if pl.reactivateAfter > 0 {
		time.AfterFunc(pl.reactivateAfter, func() { pl.handle.Activate(logger, pods) })
	}
}

// defaultReactivateAfter is how long after a node became usable its waiting pods are activated
// again, in case the first activation beat the scheduler's cache update.
const defaultReactivateAfter = 200 * time.Millisecond

// nodeReadyHandler keeps the census and activates waiting pods when a node is added usable or
// becomes usable.
func (pl *NodePoolReady) nodeReadyHandler(logger klog.Logger) cache.ResourceEventHandler {
	never := func(nodeaffinity.RequiredNodeAffinity) bool { return false }
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if node, ok := obj.(*v1.Node); ok {
				indexChanged := pl.labelSets.observeNode(node)
				pl.census.put(node)
				pl.activateForNode(logger, node, never)
				if indexChanged {
					pl.activateWaiting(logger)
				}
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldNode, ok1 := oldObj.(*v1.Node)
			node, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || sameReadinessInputs(oldNode, node) {
				return
			}
			sets := pl.labelSets.current()
			indexChanged := pl.labelSets.observeNode(node)
			pl.census.put(node)
			pl.activateForNode(logger, node, func(affinity nodeaffinity.RequiredNodeAffinity) bool {
				return pl.usable(affinity, oldNode, sets)
			})
			if indexChanged {
				// A pool stopped (or started) being labelled from a set not in view: other
				// nodes of the pool changed verdict with it.
				pl.activateWaiting(logger)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				indexChanged := pl.labelSets.forgetNode(node.Name)
				pl.census.remove(node.Name)
				if indexChanged {
					pl.census.recount()
					pl.activateWaiting(logger)
				}
			}
		},
	}
}

// sameReadinessInputs reports whether an update left everything usable() reads unchanged: the
// labels (readiness and node affinity) and the managed-labels annotation. Most node updates are
// status heartbeats, which this skips cheaply.
func sameReadinessInputs(oldNode, node *v1.Node) bool {
	return maps.Equal(oldNode.Labels, node.Labels) &&
		oldNode.Annotations[pool.ManagedLabelsAnnotation] == node.Annotations[pool.ManagedLabelsAnnotation]
}
