//go:build k8s136

package nodepoolaffinity

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

var _ fwk.SignPlugin = &NodePoolAffinity{}

// SignPod signs with what in-tree NodeAffinity signs (KEP-5598, OpportunisticBatching, 1.35+):
// the nodes PreFilter returns are a function of the pod's nodeSelector and required node
// affinity, and fragments of the same key must carry the same value, so they are NodeAffinity's.
func (pl *NodePoolAffinity) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	aff, err := fwk.NodeAffinitySigner(pod)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	return []fwk.SignFragment{
		{Key: fwk.NodeAffinitySignerName, Value: aff},
		{Key: fwk.NodeSelectorSignerName, Value: pod.Spec.NodeSelector},
	}, nil
}
