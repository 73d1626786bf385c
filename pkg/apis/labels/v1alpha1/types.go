package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label keys are qualified names: an optional DNS-subdomain prefix and '/', then a name of at
// most 63 characters. Values are empty or at most 63 characters. The kubernetes.io and k8s.io
// domains are reserved for Kubernetes itself, except node-role.kubernetes.io (a role label
// operators set) and node-restriction.kubernetes.io (the prefix Kubernetes recommends for
// isolation labels that kubelets cannot set on themselves). Keys under topology.pool-scheduler.io/
// belong to pool-labeler's domain mode, which writes each node's own values.

// LabelValue is a node label value: empty, or at most 63 alphanumerics, '-', '_' or '.',
// starting and ending with an alphanumeric.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// NodePoolLabelSetSpec is the desired label set of one node pool.
type NodePoolLabelSetSpec struct {
	// Labels are applied to every node of the pool named like this object. Nodes of the pool are
	// not used by pool-scheduler until they carry all of them with these values.
	// +optional
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && k.indexOf('/') <= 253 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="every label key must be a qualified name: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",reason=FieldValueInvalid
	// +kubebuilder:validation:XValidation:rule="self.all(k, (!k.matches('^([^/]*[.])?(kubernetes|k8s)[.]io/') || k.startsWith('node-role.kubernetes.io/') || k.startsWith('node-restriction.kubernetes.io/')) && !(k in ['kubernetes.azure.com/managed', 'kubernetes.azure.com/resource-group', 'node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master']))",message="label keys in the kubernetes.io and k8s.io domains are reserved for Kubernetes, and kubernetes.azure.com/managed, kubernetes.azure.com/resource-group and the control-plane roles take a node out of Azure's load balancers: a NodePoolLabelSet cannot set them; use your own domain, or node-restriction.kubernetes.io/ for isolation labels",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('topology.pool-scheduler.io/'))",message="label keys under topology.pool-scheduler.io/ are written on each node by pool-labeler's domain mode and cannot be set by a NodePoolLabelSet: the two would rewrite each other's value forever",reason=FieldValueForbidden
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// DecodeError is set, instead of Labels, when the stored spec does not have the types above
	// (possible only if the CRD's schema was bypassed, by an older or hand-edited CRD). It is
	// never serialized. See UnmarshalJSON.
	DecodeError string `json:"-"`
}

// SyncState summarises whether a NodePoolLabelSet is applied to its pool's nodes.
// +kubebuilder:validation:Enum=Synced;Pending;Conflict;Error
type SyncState string

const (
	// SyncStateSynced means every node of the pool carries the set's labels.
	SyncStateSynced SyncState = "Synced"
	// SyncStatePending means some nodes of the pool do not carry the labels yet.
	SyncStatePending SyncState = "Pending"
	// SyncStateConflict means a node carries one of the keys with another value, set by someone else.
	SyncStateConflict SyncState = "Conflict"
	// SyncStateError means applying the labels failed.
	SyncStateError SyncState = "Error"
)

// HeldReason says why NodePoolReady keeps pods off a node.
// +kubebuilder:validation:Enum=MissingLabel;WrongValue;StaleLabel;MissingRequiredLabel;MalformedAnnotation;LabelSetConflict;UnknownPool;LabelSetNotVisible
type HeldReason string

// Reasons a node is held.
const (
	// HeldMissingLabel: a label of the pool's sets is not on the node.
	HeldMissingLabel HeldReason = "MissingLabel"
	// HeldWrongValue: a label of the pool's sets is on the node with another value.
	HeldWrongValue HeldReason = "WrongValue"
	// HeldStaleLabel: a label the labeler applied and no set wants any more is still on the node.
	HeldStaleLabel HeldReason = "StaleLabel"
	// HeldMissingRequiredLabel: a key of requiredLabelKeys (or the pool's) is not on the node.
	HeldMissingRequiredLabel HeldReason = "MissingRequiredLabel"
	// HeldMalformedAnnotation: the managed-labels annotation cannot be read.
	HeldMalformedAnnotation HeldReason = "MalformedAnnotation"
	// HeldLabelSetConflict: the pool's sets disagree on a label and the node carries none of
	// their values.
	HeldLabelSetConflict HeldReason = "LabelSetConflict"
	// HeldUnknownPool: the node has no pool label (never in a set's status: such a node is in
	// no pool; poolctl status reports it).
	HeldUnknownPool HeldReason = "UnknownPool"
	// HeldLabelSetNotVisible: no set of the node's pool is read, other nodes of the pool carry
	// labels a labeler applied and this one none (never in a set's status, since the pool has
	// no set in view; poolctl status reports it).
	HeldLabelSetNotVisible HeldReason = "LabelSetNotVisible"
)

// HeldNode is a node of the pool that NodePoolReady keeps pods off, and why.
type HeldNode struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Reason is the first cause found, in NodePoolReady's order.
	Reason HeldReason `json:"reason"`
	// Key is the label key at fault.
	// +optional
	Key string `json:"key,omitempty"`
	// Want is the desired value (for LabelSetConflict, the values the sets give, joined by "|").
	// +optional
	Want string `json:"want,omitempty"`
	// Got is the node's value.
	// +optional
	Got string `json:"got,omitempty"`
	// Since is when the labeler first saw the node held (kept across labeler restarts while
	// the node is listed here).
	// +optional
	Since metav1.Time `json:"since,omitempty"`
}

// NodePoolLabelSetStatus is written by the labeler.
type NodePoolLabelSetStatus struct {
	// State is the overall sync state.
	// +optional
	State SyncState `json:"state,omitempty"`
	// Message explains the state, for example the first conflict or error.
	// +optional
	Message string `json:"message,omitempty"`
	// NodesMatched is the number of nodes in the pool.
	// +optional
	NodesMatched int32 `json:"nodesMatched,omitempty"`
	// NodesInSync is the number of nodes of the pool that carry every label of the set.
	// +optional
	NodesInSync int32 `json:"nodesInSync,omitempty"`
	// NodesReady is the number of nodes of the pool that pool-scheduler's NodePoolReady accepts,
	// judged by the labeler with the scheduler's rule and configuration (all the pool's sets,
	// requiredLabelKeys, stale labels).
	// +optional
	NodesReady int32 `json:"nodesReady,omitempty"`
	// NodesHeld is the number of nodes of the pool that NodePoolReady keeps pods off.
	// +optional
	NodesHeld int32 `json:"nodesHeld,omitempty"`
	// HeldNodes are the first held nodes by name (at most 20; NodesHeld counts them all), each
	// with why it is held.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	HeldNodes []HeldNode `json:"heldNodes,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions follow the Kubernetes condition conventions.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePoolLabelSet is the desired label set of a node pool; its name is the pool's name.
//
// A pool-identity key (the default poolLabelKeys, pkg/apis/config/v1.DefaultPoolLabelKeys) may
// be set only to the set's own name: another value would move the node to another pool, whose
// set would move it back, forever. Banzai's CRs set nodepool.banzaicloud.io/name to their own
// name, which moves nothing. pkg/pool refuses the same, and the configured keys too.
//
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.labels) || self.spec.labels.all(k, !(k in ['nodepool.banzaicloud.io/name', 'node.banzaicloud.io/nodepool', 'kubernetes.azure.com/agentpool', 'agentpool', 'cloud.google.com/gke-nodepool', 'eks.amazonaws.com/nodegroup', 'karpenter.sh/nodepool', 'doks.digitalocean.com/node-pool']) || self.spec.labels[k] == self.metadata.name)",message="a pool-identity label key may only be set to the NodePoolLabelSet's own name (its pool): another value would move the node to another pool",reason=FieldValueForbidden,fieldPath=".spec.labels"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=npls,categories=pool-scheduler
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.nodesMatched`
// +kubebuilder:printcolumn:name="InSync",type=integer,JSONPath=`.status.nodesInSync`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.nodesReady`
// +kubebuilder:printcolumn:name="Held",type=integer,JSONPath=`.status.nodesHeld`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodePoolLabelSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodePoolLabelSetSpec `json:"spec,omitempty"`
	// +optional
	Status NodePoolLabelSetStatus `json:"status,omitempty"`
}

// NodePoolLabelSetList is a list of NodePoolLabelSets.
//
// +kubebuilder:object:root=true
type NodePoolLabelSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePoolLabelSet `json:"items"`
}
