//go:build k8s136

package nodepoolready

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// SignKey names this plugin's part of a pod's signature (KEP-5598, OpportunisticBatching, 1.35+):
// a node's readiness depends on the node alone; the pod only decides whether it is judged.
const SignKey = "pool-scheduler.io/NodePoolReady.exempt()"

var _ fwk.SignPlugin = &NodePoolReady{}

// SignPod signs every pod: two pods that are both exempt (or both not) get the same verdicts on
// the same nodes. A profile with a Filter plugin that does not sign turns batching off for every
// pod (frameworkImpl.computeBatchablePlugins).
func (pl *NodePoolReady) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: SignKey, Value: pl.ignoreDaemonSetPods && isExempt(pod)}}, nil
}
