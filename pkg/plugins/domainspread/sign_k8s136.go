//go:build k8s136

package domainspread

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// ErrNotSignable is SignPod's reason for the pods this plugin spreads.
const ErrNotSignable = "pods DomainSpread spreads are not signable"

var _ fwk.SignPlugin = &DomainSpread{}

// SignPod refuses the pods it spreads (KEP-5598, OpportunisticBatching, 1.35+): their verdicts
// and scores depend on where the workload's replicas run, which each placement changes, so a
// previous pod's ranking cannot be reused (in-tree PodTopologySpread refuses pods with
// constraints for the same reason). Pods it leaves alone are signed with nothing of its own.
func (pl *DomainSpread) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, ok := pl.workloadToSpread(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, ErrNotSignable)
	}
	return nil, nil
}
