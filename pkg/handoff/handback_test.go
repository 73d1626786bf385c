package handoff

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// TestTrimWaitingPod: the cached pod answers every question the controller asks of it as the
// whole pod does, and keeps nothing else.
func TestTrimWaitingPod(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	full := func() *v1.Pod {
		p := st.MakePod().Namespace("app").Name("web-1").UID("u1").SchedulerName("pool-scheduler").
			Container("registry.k8s.io/pause:3.10").Labels(map[string]string{"app": "web"}).
			OwnerReference("web", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
		p.Annotations = map[string]string{profile.HandedOverAnnotation: "pool-scheduler", "example.com/big": "x"}
		p.ResourceVersion, p.CreationTimestamp = "42", created
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
		p.Status.Phase = v1.PodPending
		return p
	}
	with := func(f func(p *v1.Pod)) *v1.Pod { p := full(); f(p); return p }
	tests := []struct {
		name string
		pod  *v1.Pod
	}{
		{"handed over, waiting", full()},
		{"not handed over", with(func(p *v1.Pod) { p.Annotations = nil })},
		{"gated", with(func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}} })},
		{"bound", with(func(p *v1.Pod) { p.Spec.NodeName = "n1" })},
		{"terminating", with(func(p *v1.Pod) { p.DeletionTimestamp = &created })},
		{"bare", with(func(p *v1.Pod) { p.OwnerReferences = nil })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := trimWaitingPod(tc.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			trimmed := obj.(*v1.Pod)
			if got, want := Waiting(trimmed, "pool-scheduler"), Waiting(tc.pod, "pool-scheduler"); got != want {
				t.Errorf("Waiting = %v, want %v", got, want)
			}
			if got, want := HandedOver(trimmed, "pool-scheduler"), HandedOver(tc.pod, "pool-scheduler"); got != want {
				t.Errorf("HandedOver = %v, want %v", got, want)
			}
			gotClass, _ := Classify(trimmed)
			wantClass, _ := Classify(tc.pod)
			if gotClass != wantClass {
				t.Errorf("Classify = %s, want %s", gotClass, wantClass)
			}
			// deleteAsListed's preconditions, the events' reference and the owner memory.
			if diff := cmp.Diff([]any{tc.pod.Namespace, tc.pod.Name, tc.pod.UID, tc.pod.ResourceVersion, tc.pod.CreationTimestamp, tc.pod.OwnerReferences},
				[]any{trimmed.Namespace, trimmed.Name, trimmed.UID, trimmed.ResourceVersion, trimmed.CreationTimestamp, trimmed.OwnerReferences}); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
			if len(trimmed.Spec.Containers) != 0 || trimmed.ManagedFields != nil || trimmed.Labels != nil || trimmed.Annotations["example.com/big"] != "" {
				t.Errorf("kept more than the controller reads: %+v", trimmed)
			}
		})
	}
}
