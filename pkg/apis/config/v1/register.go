package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is kube-scheduler's config group version, which our args join.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}

var (
	localSchemeBuilder = &schedconfigv1.SchemeBuilder
	// AddToScheme registers the versioned args types, their defaults and conversions.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&NodePoolReadyArgs{},
		&SystemPoolGuardArgs{},
		&NodePoolAffinityArgs{},
		&DomainSpreadArgs{},
	)
	return nil
}

func init() {
	// Conversions register themselves in zz_generated.conversion.go.
	localSchemeBuilder.Register(addKnownTypes)
	localSchemeBuilder.Register(RegisterDefaults)
}
