// Package podfixture holds realistic pods for the benchmarks of what our controllers cache.
package podfixture

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Pods is the number of pods the cache benchmarks hold: the 10 000 of the memory figures in
// docs/operations.md; 1 000 under the race detector (make test's smoke run), which is ten
// times slower and measures per pod all the same.
const Pods = 10000 / raceDivisor

// RealisticPod is the i-th replica of a Deployment as the API server serves it to an informer
// (JSON): two containers with environment, mounts and probes, managed fields of its three
// writers, and the kubelet's container statuses.
func RealisticPod(i int) []byte {
	env := make([]v1.EnvVar, 12)
	for j := range env {
		env[j] = v1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-of-setting-%d-for-the-app", j)}
	}
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	c := func(name string, req string) v1.Container {
		return v1.Container{Name: name, Image: "myregistry.azurecr.io/team/" + name + ":1.2.3", Command: []string{"/" + name}, Args: []string{"--port=8080", "--log-level=info"},
			Env: env, Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			Resources:     v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(req), v1.ResourceMemory: resource.MustParse("256Mi")}},
			VolumeMounts:  []v1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			LivenessProbe: probe, ReadinessProbe: probe, TerminationMessagePath: "/dev/termination-log", ImagePullPolicy: v1.PullIfNotPresent}
	}
	fields := metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:args":{},"f:command":{},"f:env":{},"f:image":{},"f:livenessProbe":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{}}}}}`)}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("web-7d9f8b6c5d-%05d", i), UID: "0f0c3a1e-5b7d-4c2a-9e8f-1a2b3c4d5e6f", ResourceVersion: "123456789",
			GenerateName: "web-7d9f8b6c5d-", Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f8b6c5d"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-01T10:00:00Z", "pool-scheduler.io/handed-over": "pool-scheduler"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5d", UID: "0", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &fields},
				{Manager: "pool-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &fields, Subresource: "binding"},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &fields, Subresource: "status"}}},
		Spec: v1.PodSpec{Containers: []v1.Container{c("app", "500m"), c("sidecar", "50m")}, SchedulerName: "pool-scheduler", NodeName: fmt.Sprintf("aks-spot-12345678-vmss%06d", i%100),
			ServiceAccountName: "web", Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
			Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "web-config"}}}},
				{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}}}}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.244.1.23", HostIP: "10.224.0.4",
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue}, {Type: v1.PodInitialized, Status: v1.ConditionTrue}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, Image: "myregistry.azurecr.io/team/app:1.2.3", ImageID: "myregistry.azurecr.io/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
				{Name: "sidecar", Ready: true, Image: "myregistry.azurecr.io/team/sidecar:1.2.3", ImageID: "myregistry.azurecr.io/team/sidecar@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}},
	}
	data, _ := json.Marshal(p)
	return data
}

// CachedBytesPerPod fills a store with n pods decoded as an informer decodes them, passed
// through transform (nil: whole), and returns the heap they hold per pod.
func CachedBytesPerPod(b *testing.B, n int, transform cache.TransformFunc) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range n {
		var obj any = &v1.Pod{}
		if err := json.Unmarshal(RealisticPod(i), obj); err != nil {
			b.Fatal(err)
		}
		if transform != nil {
			var err error
			if obj, err = transform(obj); err != nil {
				b.Fatal(err)
			}
		}
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// ReportCacheMemory reports the heap a cache holds per pod, whole and through transform, at Pods
// realistic replicas, and the trimmed figure scaled to 10 000 pods.
func ReportCacheMemory(b *testing.B, transform cache.TransformFunc) {
	for range b.N {
		whole := CachedBytesPerPod(b, Pods, nil)
		trimmed := CachedBytesPerPod(b, Pods, transform)
		b.ReportMetric(whole, "B/pod-whole")
		b.ReportMetric(trimmed, "B/pod-trimmed")
		b.ReportMetric(trimmed*10000/(1<<20), "MiB-trimmed-10k")
	}
}
