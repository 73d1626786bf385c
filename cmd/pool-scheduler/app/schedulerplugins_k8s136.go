//go:build k8s136

package app

import frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

// schedulerPlugins is empty on lines built with -tags=k8s136 (Kubernetes 1.35 and later):
// scheduler-plugins' newest release, v0.34.7, uses the framework API that 1.35 moved to
// k8s.io/kube-scheduler/framework, and no release for a later Kubernetes is available
// (pkg/version.SchedulerPlugins is "" here).
var schedulerPlugins = frameworkruntime.Registry{}
