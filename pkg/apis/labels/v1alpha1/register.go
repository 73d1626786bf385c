package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of NodePoolLabelSet.
const GroupName = "labels.banzaicloud.io"

var (
	// SchemeGroupVersion is the group version of the NodePoolLabelSet API.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}
	// Resource is the resource the scheduler, the labeler and the tools watch.
	Resource = SchemeGroupVersion.WithResource("nodepoollabelsets")

	// SchemeBuilder registers the API types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the API types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// EventResource is the resource name the scheduler framework uses for NodePoolLabelSet events
// (<plural>.<version>.<group>).
const EventResource = "nodepoollabelsets.v1alpha1." + GroupName

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &NodePoolLabelSet{}, &NodePoolLabelSetList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
