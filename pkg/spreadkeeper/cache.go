package spreadkeeper

import (
	v1 "k8s.io/api/core/v1"
)

// lastAppliedAnnotation is kubectl apply's copy of the whole object, often the largest
// annotation of a pod created with kubectl apply; nothing here reads it.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// trimPod drops from a cached pod what neither the keeper nor the rebalancer reads: managed
// fields, kubectl's last-applied copy, each container's command, arguments, environment, mounts,
// probes and lifecycle, and the containers' statuses. Kept: metadata (labels, annotations,
// owners), the scheduling fields of the spec (node, affinity, tolerations, priority), every
// container's resources and restart policy (resourcehelper.PodRequests reads them, sidecars
// included), volumes (local storage protects a pod), and the pod's phase and conditions
// (readiness). docs/spread.md has the measurement.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	if _, ok := p.Annotations[lastAppliedAnnotation]; ok {
		delete(p.Annotations, lastAppliedAnnotation)
	}
	p.Spec.Containers = trimContainers(p.Spec.Containers)
	p.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	p.Spec.EphemeralContainers = nil
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
	return p, nil
}

func trimContainers(cs []v1.Container) []v1.Container {
	for i := range cs {
		cs[i] = v1.Container{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy, Ports: cs[i].Ports}
	}
	return cs
}

// trimNode drops from a cached node what is never read: managed fields and the images it holds
// (often the largest part of a node's status).
func trimNode(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Status.Images = nil
	return n, nil
}
