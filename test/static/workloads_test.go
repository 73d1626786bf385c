package static

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestManifestWorkloads: the kustomize manifests' workloads, as the chart's (chart render tests in
// test/integration): every container has a memory limit above its request and no CPU limit, and
// every Deployment a kubernetes.io/hostname ScheduleAnyway spread constraint whose labelSelector
// matches its own pods.
func TestManifestWorkloads(t *testing.T) {
	root := repoRoot(t)
	want := map[string]bool{
		"Deployment pool-scheduler": false, "Deployment pool-labeler": false, "Deployment pool-scheduler-handoff": false,
		"Deployment pool-scheduler-spread": false, "Deployment pool-scheduler-webhook": false, "DaemonSet pool-labeler-domain": false,
		"Deployment pool-scheduler-certs": false,
	}
	for _, dir := range []string{"manifests", "manifests/labeler/domain", "manifests/admission/webhook"} {
		for _, o := range util.KustomizeObjects(t, filepath.Join(root, dir)) {
			var tmpl v1.PodTemplateSpec
			switch o.GetKind() {
			case "Deployment":
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				tmpl = d.Spec.Template
				checkHostSpread(t, "Deployment "+o.GetName(), tmpl)
			case "DaemonSet":
				var d appsv1.DaemonSet
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				tmpl = d.Spec.Template
			case "StatefulSet", "Job", "CronJob", "ReplicaSet", "Pod":
				t.Fatalf("%s %s: a workload kind this test does not read", o.GetKind(), o.GetName())
			default:
				continue
			}
			id := o.GetKind() + " " + o.GetName()
			if _, ok := want[id]; ok {
				want[id] = true
			}
			for _, c := range append(append([]v1.Container{}, tmpl.Spec.InitContainers...), tmpl.Spec.Containers...) {
				limit, ok := c.Resources.Limits[v1.ResourceMemory]
				req := c.Resources.Requests[v1.ResourceMemory]
				if !ok || limit.Cmp(req) <= 0 {
					t.Errorf("%s (%s) container %s: memory limit %v, request %s: want a limit above the request", id, dir, c.Name, c.Resources.Limits, req.String())
				}
				if _, ok := c.Resources.Limits[v1.ResourceCPU]; ok {
					t.Errorf("%s (%s) container %s: a CPU limit (throttles it)", id, dir, c.Name)
				}
			}
		}
	}
	for id, seen := range want {
		if !seen {
			t.Errorf("%s not found in the kustomize manifests", id)
		}
	}
}

func checkHostSpread(t *testing.T, id string, tmpl v1.PodTemplateSpec) {
	t.Helper()
	for _, c := range tmpl.Spec.TopologySpreadConstraints {
		if c.TopologyKey != "kubernetes.io/hostname" {
			continue
		}
		if c.WhenUnsatisfiable != v1.ScheduleAnyway || c.LabelSelector == nil {
			t.Errorf("%s: hostname constraint %+v: want ScheduleAnyway with a labelSelector", id, c)
			return
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(tmpl.Labels)) {
			t.Errorf("%s: hostname constraint's selector %v (%v) does not match its pods' labels %v", id, sel, err, tmpl.Labels)
		}
		return
	}
	t.Errorf("%s: no kubernetes.io/hostname topology spread constraint", id)
}
