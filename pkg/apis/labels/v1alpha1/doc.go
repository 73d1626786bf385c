// Package v1alpha1 holds the NodePoolLabelSet API, group labels.banzaicloud.io. The group, kind
// and spec are those of the Banzai Cloud nodepool-labels-operator, so CRs written for it keep working.
//
// +kubebuilder:object:generate=true
// +groupName=labels.banzaicloud.io
package v1alpha1
