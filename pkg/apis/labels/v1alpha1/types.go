package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label keys are qualified names: an optional DNS-subdomain prefix and '/', then a name of at
// most 63 characters. Values are empty or at most 63 characters. The kubernetes.io and k8s.io
// domains are reserved for Kubernetes itself, except node-role.kubernetes.io (a role label
// operators set) and node-restriction.kubernetes.io (the prefix Kubernetes recommends for
// isolation labels that kubelets cannot set on themselves).

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
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?(kubernetes|k8s)[.]io/') || k.startsWith('node-role.kubernetes.io/') || k.startsWith('node-restriction.kubernetes.io/'))",message="label keys in the kubernetes.io and k8s.io domains are reserved for Kubernetes and cannot be set by a NodePoolLabelSet; use your own domain, or node-restriction.kubernetes.io/ for isolation labels",reason=FieldValueForbidden
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
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=npls,categories=pool-scheduler
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.nodesMatched`
// +kubebuilder:printcolumn:name="InSync",type=integer,JSONPath=`.status.nodesInSync`
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
