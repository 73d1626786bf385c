//go:build k8s136

package systempoolguard

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// SignKey names this plugin's part of a pod's signature (KEP-5598, OpportunisticBatching, 1.35+).
const SignKey = "pool-scheduler.io/SystemPoolGuard.systemPod()"

var _ fwk.SignPlugin = &SystemPoolGuard{}

// SignPod signs every pod: Filter and Score depend on the node and on whether the pod is a
// system pod, nothing else (the Filter skipped for a pod whose node affinity refuses system
// nodes changes no verdict: NodeAffinity, which signs that affinity, refuses them).
func (pl *SystemPoolGuard) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: SignKey, Value: pl.policy.IsSystemPod(pod)}}, nil
}
