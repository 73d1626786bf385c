// Package config holds the internal types of pool-scheduler's plugin args. Args are written in
// KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) and decoded strictly into these.
//
// +k8s:deepcopy-gen=package
// +kubebuilder:object:generate=true
package config
