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
	// LabelSetNamespaces are the namespaces whose NodePoolLabelSets the gate reads (and
	// pool-labeler applies): where they live is an install decision, e.g. [pool-scheduler] for
	// pool-labeler's own sets, [pipeline-system] for the nodepool-labels-operator's. Default:
	// all namespaces.
	LabelSetNamespaces []string `json:"labelSetNamespaces,omitempty"`
	// LabelSetNamespace is the single namespace of earlier versions. Deprecated: use
	// labelSetNamespaces; it is read as one more entry of labelSetNamespaces.
	LabelSetNamespace string `json:"labelSetNamespace,omitempty"`
	// IgnoreDaemonSetPods lets pods owned by a DaemonSet onto nodes that are not ready yet: node
	// agents (including the domain labeler) must run before the node is labelled. Default: true.
	IgnoreDaemonSetPods *bool `json:"ignoreDaemonSetPods,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NodePoolAffinityArgs configures the NodePoolAffinity plugin, which narrows the nodes a pod is
// filtered on to the pools its required node selection pins it to (a nodeSelector entry on a
// pool key, or an In expression on one in every required node-affinity term).
type NodePoolAffinityArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PoolLabelKeys are the node label keys naming a node's pool. Default: as NodePoolReady.
	PoolLabelKeys []string `json:"poolLabelKeys,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SystemPoolGuardArgs configures the SystemPoolGuard plugin. A node is a system node if its pool
// is in systemPools or it matches systemNodeSelector. A pod is a system pod if it runs in a
// systemNamespace, has a systemPriorityClass, is owned by a DaemonSet (daemonSetPodsAreSystemPods)
// or tolerates one of systemTolerationKeys by name (a wildcard toleration does not count).
type SystemPoolGuardArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PoolLabelKeys is the ordered list of node label keys naming a node's pool. Default: as NodePoolReady.
	PoolLabelKeys []string `json:"poolLabelKeys,omitempty"`
	// SystemPools are the names of the system pools. Default: [system]. Set [] to rely on the selector only.
	//
	// The lists below are defaulted only when absent, so [] must survive encoding: no omitempty.
	// kube-scheduler writes the loaded configuration back out (--write-config-to, its startup
	// log), and a dropped [] would read back as the default.
	SystemPools []string `json:"systemPools"`
	// SystemNodeSelector also marks system nodes. Default: matchLabels
	// {kubernetes.azure.com/mode: system}, AKS's system-mode pools; {} (an empty selector)
	// switches it off.
	SystemNodeSelector *metav1.LabelSelector `json:"systemNodeSelector,omitempty"`
	// SystemNamespaces hold system pods. Default: [kube-system].
	SystemNamespaces []string `json:"systemNamespaces"`
	// SystemPriorityClasses mark system pods. Default: [system-cluster-critical, system-node-critical].
	SystemPriorityClasses []string `json:"systemPriorityClasses"`
	// SystemTolerationKeys: a pod tolerating one of these taint keys by name is a system pod.
	// Default: [CriticalAddonsOnly] (the taint AKS allows on system pools).
	SystemTolerationKeys []string `json:"systemTolerationKeys"`
	// DaemonSetPodsAreSystemPods lets DaemonSet pods (node agents) run on system nodes. Default: true.
	DaemonSetPodsAreSystemPods *bool `json:"daemonSetPodsAreSystemPods,omitempty"`
}

// SpreadMode is Soft (score only) or Hard (also filter).
type SpreadMode string

// SpreadDimension is one topology dimension DomainSpread spreads over.
type SpreadDimension struct {
	// Name identifies the dimension in logs, e.g. update-domain.
	Name string `json:"name"`
	// LabelKeys are read in order; the first present on a node gives its domain.
	LabelKeys []string `json:"labelKeys"`
	// Joint makes the domain the tuple of this and every previous dimension's value, for keys
	// whose values repeat across the previous dimension (e.g. fault domains numbered 0..2 in every zone).
	Joint bool `json:"joint,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// DomainSpreadArgs configures the DomainSpread plugin.
type DomainSpreadArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Dimensions are spread over in order: the first dominates, later ones break ties.
	// Default: zone (the zone label, which on Azure VMs outside zones holds the platform fault
	// domain; pool-labeler's fault-domain label where a node has no zone label), update-domain,
	// host (see the plugin's README).
	Dimensions []SpreadDimension `json:"dimensions,omitempty"`
	// Mode is Soft (default: score only) or Hard (also reject nodes that would exceed maxSkew).
	Mode SpreadMode `json:"mode,omitempty"`
	// MaxSkew is the largest allowed difference, per dimension, between the replica count of a
	// domain and the least loaded eligible domain, in Hard mode. Default: 1.
	MaxSkew *int32 `json:"maxSkew,omitempty"`
	// SpreadPodsWithConstraints makes DomainSpread also spread pods that carry their own
	// topologySpreadConstraints (by default they are left to PodTopologySpread). Default: false.
	SpreadPodsWithConstraints *bool `json:"spreadPodsWithConstraints,omitempty"`
	// RejectNodesMissingKeys makes Hard mode reject nodes that lack a dimension's keys (by default
	// the dimension is ignored for them). Default: false.
	RejectNodesMissingKeys *bool `json:"rejectNodesMissingKeys,omitempty"`
	// DeletionCostAtBind makes the binding of each replica of a ReplicaSet or
	// ReplicationController DomainSpread spreads carry controller.kubernetes.io/pod-deletion-cost:
	// below every cost the workload's replicas carry, so a scale-down removes replicas in the
	// reverse order of their placement, back through the spread states the placements built,
	// without a write of its own (the spread keeper then corrects only what changed otherwise).
	// A pod whose template sets the annotation keeps it. Default: true.
	DeletionCostAtBind *bool `json:"deletionCostAtBind,omitempty"`
}
