package domainspread

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// replicaIndex counts every workload's replicas per node, so that a scheduling cycle reads only
// the nodes that hold the pod's workload instead of scanning every pod of the snapshot.
//
// It follows the scheduler's own view of pods: bound pods from the scheduler's pod informer
// (which leaves out succeeded and failed pods), plus pods this plugin's profile has assumed on a
// node (Reserve) and not yet seen bound, minus those Unreserve gives back. Terminating pods are
// not counted: their replacements are already being scheduled. Pods assumed by another profile
// of the same scheduler count once the informer reports them bound.
type replicaIndex struct {
	mu sync.RWMutex
	// placed holds where each counted pod is counted.
	placed map[types.UID]placement
	// nodes holds, per workload, its replicas per node name.
	nodes map[workload]map[string]int32
	// lowest holds, per workload with replicas, the lowest deletion cost any of them has carried
	// (0 for a replica without one, as the ReplicaSet controller reads it): the next replica's
	// binding carries less (assume).
	lowest map[workload]int32

	synced       atomic.Bool
	registration cache.ResourceEventHandlerRegistration
	// uncounted, if set, runs after the informer made the index uncount a replica of a workload
	// (outside the lock); pending pods of the workload may fit now.
	uncounted func(workload)
	// placedOrGone, if set, runs for every pod the informer reports on a node or deleted.
	placedOrGone func(workload, types.UID)
	// syncTimeout bounds how long a cycle waits for the initial list (see waitForSync).
	syncTimeout time.Duration
}

type placement struct {
	workload workload
	node     string
	// bound: seen on its node by the informer. Unreserve leaves such a pod counted.
	bound bool
}

func newReplicaIndex() *replicaIndex {
	return &replicaIndex{placed: map[types.UID]placement{}, nodes: map[workload]map[string]int32{}, lowest: map[workload]int32{}, syncTimeout: defaultSyncTimeout}
}

// place counts pod uid for w on node, moving it if it was counted elsewhere; cost is the deletion
// cost the pod ranks by. What the informer reported bound wins over an assumption (Reserve)
// made from an older view.
func (x *replicaIndex) place(uid types.UID, w workload, node string, bound bool, cost int32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.placeLocked(uid, w, node, bound, cost)
}

// assume counts a pod this profile places (Reserve). With newCost it returns the deletion cost
// the pod's binding is to carry: below every cost the workload's replicas have carried, so a
// scale-down removes replicas in the reverse order of their placement; ok is false when no such
// cost is left. Without newCost the pod ranks by cost, its own annotation's.
func (x *replicaIndex) assume(uid types.UID, w workload, node string, newCost bool, cost int32) (int32, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ok := false
	if newCost {
		cost, ok = 0, true
		if lowest, has := x.lowest[w]; has {
			cost, ok = spread.NextDeletionCost(lowest)
		}
	}
	x.placeLocked(uid, w, node, false, cost)
	return cost, ok
}

func (x *replicaIndex) placeLocked(uid types.UID, w workload, node string, bound bool, cost int32) {
	if old, ok := x.placed[uid]; ok {
		if old.bound && !bound {
			return
		}
		if old.workload == w && old.node == node {
			if bound && !old.bound {
				old.bound = true
				x.placed[uid] = old
			}
			x.lowerLocked(w, cost)
			return
		}
		x.uncountLocked(old)
	}
	x.placed[uid] = placement{workload: w, node: node, bound: bound}
	x.lowerLocked(w, cost)
	perNode := x.nodes[w]
	if perNode == nil {
		perNode = map[string]int32{}
		x.nodes[w] = perNode
	}
	perNode[node]++
}

// remove stops counting pod uid; with onlyAssumed, only if the informer has not seen it bound.
// It returns the workload of the pod it uncounted, if it did.
func (x *replicaIndex) remove(uid types.UID, onlyAssumed bool) (workload, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, ok := x.placed[uid]
	if !ok || (onlyAssumed && old.bound) {
		return workload{}, false
	}
	delete(x.placed, uid)
	x.uncountLocked(old)
	return old.workload, true
}

// removeObserved uncounts a pod the informer reports gone or no longer counting.
func (x *replicaIndex) removeObserved(uid types.UID) {
	if w, ok := x.remove(uid, false); ok && x.uncounted != nil {
		x.uncounted(w)
	}
}

// lowerLocked records a deletion cost a replica of w carries.
func (x *replicaIndex) lowerLocked(w workload, cost int32) {
	if lowest, ok := x.lowest[w]; !ok || cost < lowest {
		x.lowest[w] = cost
	}
}

func (x *replicaIndex) uncountLocked(p placement) {
	perNode := x.nodes[p.workload]
	if perNode[p.node]--; perNode[p.node] <= 0 {
		delete(perNode, p.node)
		if len(perNode) == 0 {
			delete(x.nodes, p.workload)
			delete(x.lowest, p.workload)
		}
	}
}

// each calls fn for every node holding replicas of w, with their number. fn must not call back
// into the index.
func (x *replicaIndex) each(w workload, fn func(node string, replicas int32)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for node, n := range x.nodes[w] {
		fn(node, n)
	}
}

// len is the number of pods counted, for tests and logs.
func (x *replicaIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.placed)
}

// observe applies a pod from the informer. A pod without a node is left alone: it may be
// assumed by this profile while the informer still reports an older, pending version of it.
func (x *replicaIndex) observe(pod *v1.Pod) {
	if pod.Spec.NodeName == "" {
		return
	}
	w, ok := workloadOf(pod)
	if ok && x.placedOrGone != nil {
		x.placedOrGone(w, pod.UID)
	}
	// The scheduler's informer already drops finished pods; any other informer does not.
	finished := pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
	if !ok || pod.DeletionTimestamp != nil || finished {
		x.removeObserved(pod.UID)
		return
	}
	cost, _ := spread.DeletionCostOf(pod)
	x.place(pod.UID, w, pod.Spec.NodeName, true, cost)
}

// handler keeps the index in step with the scheduler's pod informer.
func (x *replicaIndex) handler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				x.observe(pod)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				x.observe(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			pod, ok := obj.(*v1.Pod)
			if !ok {
				logger.Info("Unexpected object in a pod deletion, ignored", "plugin", Name, "type", fmt.Sprintf("%T", obj))
				return
			}
			if w, ok := workloadOf(pod); ok && x.placedOrGone != nil {
				x.placedOrGone(w, pod.UID)
			}
			x.removeObserved(pod.UID)
		},
	}
}

// defaultSyncTimeout bounds how long a scheduling cycle waits, once at startup, for the index to
// have seen the informer's initial list of pods.
const defaultSyncTimeout = 30 * time.Second

// waitForSync returns once the index reflects the informer's initial list. The scheduler starts
// scheduling after its informers synced, but each event handler receives the initial list on
// its own goroutine: the first cycles may briefly wait here, later ones return at once.
func (x *replicaIndex) waitForSync(ctx context.Context) error {
	if x.synced.Load() {
		return nil
	}
	if x.registration == nil {
		return fmt.Errorf("%s: the replica index has no pod informer", Name)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, x.syncTimeout, true, func(context.Context) (bool, error) {
		return x.registration.HasSynced(), nil
	})
	if err != nil {
		return fmt.Errorf("%s: waiting for the pod informer's initial list: %w", Name, err)
	}
	x.synced.Store(true)
	return nil
}
