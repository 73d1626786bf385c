package domainspread

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// ReasonSurgeBatch is the event reason when a placement puts more than a third of a workload on
// the surge nodes of an upgrade under way: the upgrade drains them together at its end.
const ReasonSurgeBatch = "ReplicasOnSurgeNodes"

// Reserve counts the pod on its node at once: the next replica of its workload may be scheduled
// before the binding reaches the informer, and must see this one. Reserve runs in placement
// order (the scheduling cycle is serial), so it is also where a replica's deletion cost is
// chosen, for Bind to write (bind.go).
func (pl *DomainSpread) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if w, ok := workloadOf(pod); ok {
		own, hasOwn := spread.DeletionCostOf(pod)
		newCost := !hasOwn && pl.deletionCostAtBind && pl.keepsDeletionCost(pod)
		if cost, ok := pl.replicas.assume(pod.UID, w, nodeName, newCost, own); ok {
			state.Write(bindStateKey, &bindState{cost: cost})
		}
		pl.waiting.forget(w, pod.UID)
		if view := pl.rollouts.View(); view.Upgrading() {
			pl.checkSurgeBatch(ctx, view, pod, w, nodeName)
		}
	}
	return nil
}

// checkSurgeBatch reports (event on the pod, counter) the placement that takes the workload's
// replicas on surge nodes past a third of its replicas: one predicted batch, drained at once
// when the upgrade ends. Only while a pool upgrades, and only for placements on surge nodes.
func (pl *DomainSpread) checkSurgeBatch(ctx context.Context, view *maintenance.RolloutView, pod *v1.Pod, w workload, nodeName string) {
	nodeInfos := pl.sharedLister.NodeInfos()
	fate := func(name string) maintenance.Fate {
		ni, err := nodeInfos.Get(name)
		if err != nil || ni.Node() == nil {
			return maintenance.Stays
		}
		return view.FateOf(pool.Identity{}, ni.Node())
	}
	if fate(nodeName) != maintenance.Surge {
		return
	}
	var total, onSurge int32
	pl.replicas.each(w, func(node string, n int32) {
		total += n
		if fate(node) == maintenance.Surge {
			onSurge += n
		}
	})
	// Crossing the third with this replica, not every placement after it.
	if 3*onSurge <= total || 3*(onSurge-1) > total-1 {
		return
	}
	surgeBatchTotal.Inc()
	if r := pl.handle.EventRecorder(); r != nil {
		r.Eventf(pod, nil, v1.EventTypeWarning, ReasonSurgeBatch, "Scheduling",
			"%d of the workload's %d replicas are on surge nodes of an upgrade under way, which drains them together at its end (no node that stays had room in the replica's zone); a PodDisruptionBudget keeps two thirds Ready (docs/maintenance.md)", onSurge, total)
	}
	klog.FromContext(ctx).V(2).Info("Replicas on surge nodes", "pod", klog.KObj(pod), "onSurge", onSurge, "replicas", total)
}

// Unreserve uncounts a pod whose binding failed or was refused, unless the informer has already
// seen it bound (a binding call that failed late may still have succeeded).
func (pl *DomainSpread) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.replicas.remove(pod.UID, true)
}
