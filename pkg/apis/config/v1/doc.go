// Package v1 holds the versioned plugin args as users write them in a
// kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/pool-scheduler/pool-scheduler/pkg/apis/config
// +k8s:defaulter-gen=TypeMeta
// +kubebuilder:object:generate=true
package v1
