package domainspread

import (
	"context"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// bindStateKey holds the deletion cost Reserve chose for the pod's binding.
const bindStateKey fwk.StateKey = "Bind" + Name

type bindState struct{ cost int32 }

func (s *bindState) Clone() fwk.StateData { return s }

// keepsDeletionCost reports whether pod's deletion cost is DomainSpread's to set: a replica of a
// ReplicaSet or ReplicationController (the controllers that rank by it) that the plugin spreads.
// The spread keeper keeps the costs of the same pods (pkg/spreadkeeper).
func (pl *DomainSpread) keepsDeletionCost(pod *v1.Pod) bool {
	if _, ok := spread.DeletionCostOwner(pod); !ok {
		return false
	}
	_, ok := pl.workloadToSpread(pod)
	return ok
}

// Bind binds a replica whose deletion cost Reserve chose, with the cost in the Binding's
// annotations: the API server copies them onto the pod in the write that binds it (k8s.io/kubernetes
// pkg/registry/core/pod/storage BindingREST.setPodNodeAndMetadata, on the 1.34 and 1.36 lines
// alike), so the replica carries its cost without a write of its own. Every other pod is left to
// the next binder (Skip): DomainSpread comes first in the profile's bind list, DefaultBinder after
// it. It binds as DefaultBinder does, through the scheduler's API cacher when there is one.
func (pl *DomainSpread) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	c, err := state.Read(bindStateKey)
	if err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	s, ok := c.(*bindState)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			Annotations: map[string]string{spread.DeletionCostAnnotation: strconv.Itoa(int(s.cost))}},
		Target: v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if cacher := pl.handle.APICacher(); cacher != nil {
		onFinish, err := cacher.BindPod(binding)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if err := cacher.WaitOnFinish(ctx, onFinish); err != nil {
			return fwk.AsStatus(err)
		}
		return nil
	}
	klog.FromContext(ctx).V(3).Info("Attempting to bind pod to node", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName), "deletionCost", s.cost)
	if err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}
