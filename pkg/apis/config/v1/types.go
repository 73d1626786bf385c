package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnknownPoolPolicy says what NodePoolReady does with nodes that carry no pool label:
// Auto, Reject or Allow.
type UnknownPoolPolicy string

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NodePoolReadyArgs configures the NodePoolReady plugin.
type NodePoolReadyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PoolLabelKeys is the ordered list of node label keys naming a node's pool; the first key
	// with a non-empty value wins. Default: the keys of Banzai, AKS, GKE, EKS, Karpenter and DOKS.
	PoolLabelKeys []string `json:"poolLabelKeys,omitempty"`
	// RequiredLabelKeys must be present (any value) on every node before pods are placed on it,
	// for example the update-domain label written by pool-labeler's domain mode.
	RequiredLabelKeys []string `json:"requiredLabelKeys,omitempty"`
	// PoolRequiredLabelKeys adds required keys for the nodes of particular pools (pool name -> keys).
	PoolRequiredLabelKeys map[string][]string `json:"poolRequiredLabelKeys,omitempty"`
	// UnknownPoolPolicy decides about nodes without a pool label: Auto (default) rejects them once
	// any NodePoolLabelSet exists and allows them while none does; Reject and Allow force either way.
	UnknownPoolPolicy UnknownPoolPolicy `json:"unknownPoolPolicy,omitempty"`
	// LabelSetNamespace restricts the NodePoolLabelSets considered to one namespace. Default: all namespaces.
	LabelSetNamespace string `json:"labelSetNamespace,omitempty"`
	// IgnoreDaemonSetPods lets pods owned by a DaemonSet onto nodes that are not ready yet: node
	// agents (including the domain labeler) must run before the node is labelled. Default: true.
	IgnoreDaemonSetPods *bool `json:"ignoreDaemonSetPods,omitempty"`
}
