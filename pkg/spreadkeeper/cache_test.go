package spreadkeeper

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// TestTrimPod: a cached pod keeps what the keeper and the rebalancer read (requests with
// sidecars and overhead, scheduling fields, owners, annotations, volumes, readiness) and drops
// the rest.
func TestTrimPod(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	reqs := func(cpu, mem string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}
	}
	p := st.MakePod().Namespace("app").Name("web-1").UID("u1").Node("n1").Labels(map[string]string{"app": "web"}).
		NodeAffinityIn("pool", []string{"spot"}, st.NodeSelectorTypeMatchExpressions).
		Toleration("spot").Priority(1000).Obj()
	p.Annotations = map[string]string{spread.DeletionCostAnnotation: "100", lastAppliedAnnotation: `{"huge":"object"}`}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}
	p.Spec.Containers = []v1.Container{{Name: "app", Image: "app:1", Command: []string{"/app"}, Args: []string{"--flag"},
		Env: []v1.EnvVar{{Name: "A", Value: "b"}}, Resources: reqs("500m", "256Mi"), Ports: []v1.ContainerPort{{ContainerPort: 8080, HostPort: 80}},
		VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}, ReadinessProbe: &v1.Probe{}}}
	p.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "proxy:1", Resources: reqs("100m", "64Mi"), RestartPolicy: &always, Env: []v1.EnvVar{{Name: "X"}}}}
	p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}
	p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, Image: "app:1", ImageID: "sha256:..."}}}

	obj, err := trimPod(p.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*v1.Pod)
	opts := resourcehelper.PodResourcesOptions{}
	if diff := cmp.Diff(resourcehelper.PodRequests(p, opts), resourcehelper.PodRequests(trimmed, opts)); diff != "" {
		t.Errorf("requests (-whole +trimmed):\n%s", diff)
	}
	if podutil.IsPodReady(trimmed) != podutil.IsPodReady(p) {
		t.Error("readiness changed")
	}
	if diff := cmp.Diff([]any{p.Labels, p.OwnerReferences, p.Spec.Affinity, p.Spec.Tolerations, p.Spec.Priority, p.Spec.NodeName, p.Spec.Volumes, p.Annotations[spread.DeletionCostAnnotation]},
		[]any{trimmed.Labels, trimmed.OwnerReferences, trimmed.Spec.Affinity, trimmed.Spec.Tolerations, trimmed.Spec.Priority, trimmed.Spec.NodeName, trimmed.Spec.Volumes, trimmed.Annotations[spread.DeletionCostAnnotation]}); diff != "" {
		t.Errorf("what the keeper reads (-whole +trimmed):\n%s", diff)
	}
	r := &Rebalancer{}
	if got, want := r.protected(trimmed), r.protected(p); got != want {
		t.Errorf("protected = %q, want %q", got, want)
	}
	c := trimmed.Spec.Containers[0]
	if trimmed.ManagedFields != nil || trimmed.Annotations[lastAppliedAnnotation] != "" || c.Env != nil || c.Command != nil || c.Args != nil ||
		c.VolumeMounts != nil || c.ReadinessProbe != nil || trimmed.Spec.InitContainers[0].Env != nil || trimmed.Status.ContainerStatuses != nil {
		t.Errorf("kept what nothing reads: %+v", trimmed)
	}
}

func TestTrimNode(t *testing.T) {
	n := st.MakeNode().Name("n1").Label("pool", "spot").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	n.Status.Images = []v1.ContainerImage{{Names: []string{"app:1"}, SizeBytes: 1}}
	n.Status.NodeInfo.KubeletVersion = "v1.34.2"
	obj, err := trimNode(n.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*v1.Node)
	if trimmed.ManagedFields != nil || trimmed.Status.Images != nil {
		t.Errorf("kept managed fields or images: %+v", trimmed)
	}
	if diff := cmp.Diff([]any{n.Labels, n.Status.Allocatable, n.Status.NodeInfo.KubeletVersion}, []any{trimmed.Labels, trimmed.Status.Allocatable, trimmed.Status.NodeInfo.KubeletVersion}); diff != "" {
		t.Errorf("what the keeper reads (-whole +trimmed):\n%s", diff)
	}
}
