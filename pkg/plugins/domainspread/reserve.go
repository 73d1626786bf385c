package domainspread

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Reserve counts the pod on its node at once: the next replica of its workload may be scheduled
// before the binding reaches the informer, and must see this one.
func (pl *DomainSpread) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if w, ok := workloadOf(pod); ok {
		pl.replicas.place(pod.UID, w, nodeName, false)
		pl.waiting.forget(w, pod.UID)
	}
	return nil
}

// Unreserve uncounts a pod whose binding failed or was refused, unless the informer has already
// seen it bound (a binding call that failed late may still have succeeded).
func (pl *DomainSpread) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.replicas.remove(pod.UID, true)
}
