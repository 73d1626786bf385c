package integration

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestPoolctlHandback: `poolctl handback` deletes only the pending pods that wait for
// pool-scheduler, that admission handed over and that a recreating controller owns; a bare pod,
// a pod of an unknown controller and one whose template names pool-scheduler are reported, a
// gated pod is left alone, a bound pod and another scheduler's pod are never touched, and
// --dry-run deletes nothing.
func TestPoolctlHandback(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "shop")
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(p *v1.Pod, gvk schema.GroupVersionKind, name string, uid string) *v1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
		return p
	}
	rsKind := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	handedOver := func(p *v1.Pod) *v1.Pod {
		p.Annotations = map[string]string{profile.HandedOverAnnotation: p.Spec.SchedulerName}
		return p
	}
	util.CreatePod(tCtx, t, cs, handedOver(owned(util.Pod(ns, "web-1").Obj(), rsKind, rs.Name, string(rs.UID))))
	// Its template names pool-scheduler (no admission handed it over): a replacement would wait
	// again, so it is only reported.
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "web-template").Obj(), rsKind, rs.Name, string(rs.UID)))
	// Gated (Kueue): not waiting for the scheduler; neither listed nor handed back.
	util.CreatePod(tCtx, t, cs, handedOver(owned(util.Pod(ns, "web-gated").SchedulingGates([]string{"kueue.x-k8s.io/admission"}).Obj(), rsKind, rs.Name, string(rs.UID))))
	util.CreatePod(tCtx, t, cs, util.Pod(ns, "bare").Obj())
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "custom-1").Obj(), schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "w", "0a0a0a0a-0000-4000-8000-000000000001"))
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "web-bound").Node("n1").Obj(), rsKind, rs.Name, string(rs.UID)))
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "web-default").SchedulerName(v1.DefaultSchedulerName).Obj(), rsKind, rs.Name, string(rs.UID)))

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) []handoff.Result {
		t.Helper()
		stdout, stderr, err := runPoolctl(t, append([]string{"handback", "--kubeconfig", kubeconfig, "-o", "json", "--rate", "100"}, args...)...)
		if err != nil {
			t.Fatalf("handback: %v\n%s", err, stderr)
		}
		var r []handoff.Result
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		return r
	}
	actions := func(rs []handoff.Result) map[string]string {
		out := map[string]string{}
		for _, r := range rs {
			out[r.Pod] = r.Action
		}
		return out
	}
	want := map[string]string{ns + "/bare": "reported", ns + "/custom-1": "reported", ns + "/web-1": "would hand back", ns + "/web-template": "reported"}
	if diff := cmp.Diff(want, actions(run(t, "--dry-run"))); diff != "" {
		t.Errorf("--dry-run (-want +got):\n%s", diff)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(tCtx, "web-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("--dry-run deleted web-1: %v", err)
	}
	want[ns+"/web-1"] = "handed back"
	if diff := cmp.Diff(want, actions(run(t, "-n", ns))); diff != "" {
		t.Errorf("handback (-want +got):\n%s", diff)
	}
	for name, wantGone := range map[string]bool{"web-1": true, "web-template": false, "web-gated": false, "bare": false, "custom-1": false, "web-bound": false, "web-default": false} {
		_, err := cs.CoreV1().Pods(ns).Get(tCtx, name, metav1.GetOptions{})
		if gone := apierrors.IsNotFound(err); gone != wantGone {
			t.Errorf("pod %s: gone %v (%v), want %v", name, gone, err, wantGone)
		}
	}
}
