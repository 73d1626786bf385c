package spreadkeeper

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/taints"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Fits returns why a copy of pod could not be placed on node now, or "" if it could: the
// filters of the profile whose refusal the replacement would meet, as the scheduler's plugins
// apply them (the descheduler's NodeFit checks the same, but SystemPoolGuard's):
// NodeUnschedulable (cordon), NodeAffinity (nodeSelector and required node affinity),
// TaintToleration (NoSchedule and NoExecute taints), NodeResourcesFit (allocatable against the
// requests of the pods not finished on the node, and its pod count), and SystemPoolGuard (a pod
// that is not a system pod never goes to a system node) when system is not nil. Inter-pod
// affinity, host ports, volumes and NodePoolReady are not checked: the replacement may still
// stay pending, which the scheduler reports as for any pod.
func Fits(pod *v1.Pod, node *v1.Node, onNode []*v1.Pod, system *pool.SystemPolicy) string {
	if node.Spec.Unschedulable {
		return "node is cordoned"
	}
	if match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !match {
		return "node affinity or selector does not match"
	}
	if taint, untolerated := taints.FindMatchingUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}); untolerated {
		return fmt.Sprintf("taint %s=%s:%s not tolerated", taint.Key, taint.Value, taint.Effect)
	}
	if system != nil && !system.IsSystemPod(pod) && system.ClassifyNode(node.Labels) != pool.NotSystemNode {
		return "system node"
	}
	alloc := node.Status.Allocatable
	if n, ok := alloc[v1.ResourcePods]; ok && int64(len(onNode)+1) > n.Value() {
		return "too many pods"
	}
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	used := v1.ResourceList{}
	for _, other := range onNode {
		if other.UID == pod.UID {
			continue
		}
		for name, q := range resourcehelper.PodRequests(other, resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for name, q := range want {
		if q.IsZero() || name == v1.ResourcePods {
			continue
		}
		free := alloc[name].DeepCopy()
		u := used[name]
		free.Sub(u)
		if free.Cmp(q) < 0 {
			return fmt.Sprintf("insufficient %s", name)
		}
	}
	return ""
}
