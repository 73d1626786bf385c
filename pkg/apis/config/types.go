package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnknownPoolPolicy says what NodePoolReady does with nodes that carry no pool label.
type UnknownPoolPolicy string

const (
	// UnknownPoolAuto rejects nodes without a pool once any NodePoolLabelSet exists, and allows
	// them on a cluster with none, so that a fresh install never blocks every pod.
	UnknownPoolAuto UnknownPoolPolicy = "Auto"
	// UnknownPoolReject always rejects nodes without a pool.
	UnknownPoolReject UnknownPoolPolicy = "Reject"
	// UnknownPoolAllow always allows nodes without a pool.
	UnknownPoolAllow UnknownPoolPolicy = "Allow"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NodePoolReadyArgs configures the NodePoolReady plugin.
type NodePoolReadyArgs struct {
	metav1.TypeMeta

	// PoolLabelKeys is the ordered list of node label keys naming a node's pool.
	PoolLabelKeys []string
	// RequiredLabelKeys must be present on every node before it is used.
	RequiredLabelKeys []string
	// PoolRequiredLabelKeys adds required keys for the nodes of particular pools.
	PoolRequiredLabelKeys map[string][]string
	// UnknownPoolPolicy decides about nodes without a pool label.
	UnknownPoolPolicy UnknownPoolPolicy
	// LabelSetNamespaces are the namespaces whose NodePoolLabelSets are read; empty means all.
	LabelSetNamespaces []string
	// IgnoreDaemonSetPods lets pods owned by a DaemonSet onto nodes that are not ready yet.
	IgnoreDaemonSetPods bool
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NodePoolAffinityArgs configures the NodePoolAffinity plugin.
type NodePoolAffinityArgs struct {
	metav1.TypeMeta

	// PoolLabelKeys are the node label keys naming a node's pool: a pod's required node
	// selection on one of them pins it to those pools.
	PoolLabelKeys []string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SystemPoolGuardArgs configures the SystemPoolGuard plugin.
type SystemPoolGuardArgs struct {
	metav1.TypeMeta

	// PoolLabelKeys is the ordered list of node label keys naming a node's pool.
	PoolLabelKeys []string
	// SystemPools are the names of the system pools.
	SystemPools []string
	// SystemNodeSelector also marks system nodes.
	SystemNodeSelector *metav1.LabelSelector
	// SystemNamespaces, SystemPriorityClasses and SystemTolerationKeys make a pod a system pod.
	SystemNamespaces      []string
	SystemPriorityClasses []string
	SystemTolerationKeys  []string
	// DaemonSetPodsAreSystemPods makes DaemonSet-owned pods system pods.
	DaemonSetPodsAreSystemPods bool
}

// SpreadMode says whether DomainSpread only scores (Soft) or also filters (Hard).
type SpreadMode string

const (
	// SpreadSoft scores nodes only.
	SpreadSoft SpreadMode = "Soft"
	// SpreadHard also rejects nodes where placing the pod would exceed MaxSkew.
	SpreadHard SpreadMode = "Hard"
)

// SpreadDimension is one topology dimension DomainSpread spreads over.
type SpreadDimension struct {
	// Name identifies the dimension in logs and metrics, e.g. update-domain.
	Name string
	// LabelKeys are read in order; the first present on a node gives its domain.
	LabelKeys []string
	// Joint makes the domain the tuple of this and every previous dimension's value.
	Joint bool
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// DomainSpreadArgs configures the DomainSpread plugin.
type DomainSpreadArgs struct {
	metav1.TypeMeta

	Dimensions                []SpreadDimension
	Mode                      SpreadMode
	MaxSkew                   int32
	SpreadPodsWithConstraints bool
	RejectNodesMissingKeys    bool
	DeletionCostAtBind        bool
}
