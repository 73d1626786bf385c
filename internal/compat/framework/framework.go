// Package framework is the scheduler framework's plugin API as pool-scheduler uses it, on every
// Kubernetes line it is built for (docs/compatibility.md).
//
// Kubernetes 1.35 moved the plugin interfaces (Plugin, Handle, FilterPlugin, ScorePlugin, ...)
// from k8s.io/kubernetes/pkg/scheduler/framework to k8s.io/kube-scheduler/framework, with the
// same method sets. This package re-exports them as type aliases from where the line keeps them:
// framework_k8s134.go for the 1.34 line (the default build) and framework_k8s136.go for lines
// built with -tags=k8s136 (1.35 and later). Because they are aliases, a plugin written against
// this package satisfies the framework of either line; code imports this package instead of
// either upstream one, and is the same on every line.
//
// This file holds what k8s.io/kubernetes/pkg/scheduler/framework keeps on every line.
package framework

import (
	v1 "k8s.io/api/core/v1"
	k8sfw "k8s.io/kubernetes/pkg/scheduler/framework"
)

// NewCycleState returns an empty CycleState, as the scheduler starts each scheduling cycle with.
func NewCycleState() *k8sfw.CycleState { return k8sfw.NewCycleState() }

// NewNodeInfo returns a NodeInfo holding pods, without a node (SetNode sets it).
func NewNodeInfo(pods ...*v1.Pod) *k8sfw.NodeInfo { return k8sfw.NewNodeInfo(pods...) }

// NewPodInfo returns the PodInfo of pod, with its affinity terms parsed.
func NewPodInfo(pod *v1.Pod) (*k8sfw.PodInfo, error) { return k8sfw.NewPodInfo(pod) }
