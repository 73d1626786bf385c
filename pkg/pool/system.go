package pool

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// SystemNodeReason says why a node is a system node.
type SystemNodeReason int

const (
	// NotSystemNode: the node is a user node.
	NotSystemNode SystemNodeReason = iota
	// SystemPoolName: the node's pool is one of the system pools.
	SystemPoolName
	// SystemNodeSelector: the node matches the system node selector.
	SystemNodeSelector
)

// SystemPolicy decides which nodes form the system pool and which pods are system pods. It is
// immutable after construction and safe for concurrent use; its node and pod checks do not allocate.
type SystemPolicy struct {
	Identity Identity
	// Pools are the names of the system pools.
	Pools sets.Set[string]
	// NodeSelector also marks system nodes (for example kubernetes.azure.com/mode=system); nil or
	// empty matches nothing.
	NodeSelector labels.Selector
	// Namespaces, PriorityClasses and TolerationKeys make a pod a system pod.
	Namespaces      sets.Set[string]
	PriorityClasses sets.Set[string]
	TolerationKeys  sets.Set[string]
	// DaemonSetPods makes DaemonSet-owned pods system pods.
	DaemonSetPods bool
	// Avoid is AvoidSystemNodes of the same args (NewSystemPolicy sets it): what ExcludedByAffinity
	// looks for in a pod's required node affinity.
	Avoid [][]v1.NodeSelectorRequirement
}

// ClassifyNode returns why a node with these labels is a system node, or NotSystemNode.
func (p *SystemPolicy) ClassifyNode(nodeLabels map[string]string) SystemNodeReason {
	if name, ok := p.Identity.PoolOf(nodeLabels); ok && p.Pools.Has(name) {
		return SystemPoolName
	}
	if p.NodeSelector != nil && !p.NodeSelector.Empty() && p.NodeSelector.Matches(labels.Set(nodeLabels)) {
		return SystemNodeSelector
	}
	return NotSystemNode
}

// IsSystemPod reports whether pod may use system nodes: it runs in a system namespace, has a
// system priority class, is owned by a DaemonSet (if enabled), or tolerates a system taint key
// by name. A toleration without a key (operator Exists, the wildcard many charts ship) does not
// count: it says nothing about the pod's role.
func (p *SystemPolicy) IsSystemPod(pod *v1.Pod) bool {
	if p.Namespaces.Has(pod.Namespace) || (pod.Spec.PriorityClassName != "" && p.PriorityClasses.Has(pod.Spec.PriorityClassName)) {
		return true
	}
	if p.DaemonSetPods && IsDaemonSetPod(pod) {
		return true
	}
	for i := range pod.Spec.Tolerations {
		if k := pod.Spec.Tolerations[i].Key; k != "" && p.TolerationKeys.Has(k) {
			return true
		}
	}
	return false
}

// IsDaemonSetPod reports whether an apps/v1 DaemonSet controls pod. Only the group apps counts:
// anyone who may create a pod may write any owner reference into it, and a kind DaemonSet of
// another group (a custom resource of the user's) would otherwise make it a system pod. The
// owner is not looked up, so the reference is still the pod's word (docs/security.md).
func IsDaemonSetPod(pod *v1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == appsv1.GroupName
}
