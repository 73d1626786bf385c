package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestSystemPodPolicy: the optional ValidatingAdmissionPolicy (manifests/policies/system-pods,
// and the chart's scheduler.plugins.systemPoolGuard.admissionPolicy) refuses pods outside the
// system namespaces that tolerate CriticalAddonsOnly or use a system priority class, the marks
// SystemPoolGuard takes at the pod's word, and lets every other pod through, against a real
// kube-apiserver.
func TestSystemPodPolicy(t *testing.T) {
	chartObjects := func(t *testing.T) []*unstructured.Unstructured {
		r, err := renderChart(t, chartNamespace, `scheduler: {plugins: {systemPoolGuard: {admissionPolicy: {enabled: true, extraNamespaces: [monitoring]}}}}`)
		if err != nil {
			t.Fatalf("rendering: %v", err)
		}
		var out []*unstructured.Unstructured
		for _, o := range r.objects {
			if strings.HasSuffix(o.GetName(), "-system-pods") {
				out = append(out, o)
			}
		}
		if len(out) != 2 {
			t.Fatalf("chart rendered %d system-pods policy objects, want the policy and its binding", len(out))
		}
		return out
	}
	for _, src := range []struct {
		name    string
		objects func(*testing.T) []*unstructured.Unstructured
		// extra is a namespace the source lists beside kube-system and pool-scheduler.
		extra string
	}{
		{name: "kustomize", objects: func(t *testing.T) []*unstructured.Unstructured {
			return util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "policies", "system-pods"))
		}},
		{name: "chart", objects: chartObjects, extra: "monitoring"},
	} {
		t.Run(src.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			cp := util.StartControlPlane(t)
			cs := cp.Client
			for _, ns := range []string{"pool-scheduler", "monitoring", "apps"} {
				if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cs.SchedulingV1().PriorityClasses().Create(tCtx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			util.ApplyAccessObjects(tCtx, t, cp, src.objects(t))

			critical := func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "CriticalAddonsOnly", Operator: v1.TolerationOpExists}}
			}
			priority := func(class string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.PriorityClassName = class } }
			pod := func(ns, name string, change func(*v1.Pod)) *v1.Pod {
				p := util.Pod(ns, name).Obj()
				if change != nil {
					change(p)
				}
				return p
			}
			// The policy takes effect once the apiserver has loaded it and its binding.
			probe := pod("apps", "probe", critical)
			if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := cs.CoreV1().Pods("apps").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err != nil, nil
			}); err != nil {
				t.Fatalf("the policy never refused a CriticalAddonsOnly pod in apps: %v", err)
			}

			tests := []struct {
				name string
				pod  *v1.Pod
				// refused: a part of the message; "": allowed.
				refused string
			}{
				{"CriticalAddonsOnly toleration in a user namespace", pod("apps", "tolerates", critical), "may not tolerate the system taint keys CriticalAddonsOnly"},
				{"system-cluster-critical in a user namespace", pod("apps", "cluster-critical", priority("system-cluster-critical")), "may not use the priority class system-cluster-critical"},
				{"system-node-critical in a user namespace", pod("apps", "node-critical", priority("system-node-critical")), "may not use the priority class system-node-critical"},
				{"CriticalAddonsOnly with effect and value", pod("default", "tolerates-noschedule", func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Key: "CriticalAddonsOnly", Operator: v1.TolerationOpEqual, Value: "true", Effect: v1.TaintEffectNoSchedule}}
				}), "may not tolerate"},
				{"wildcard toleration in a user namespace", pod("apps", "wildcard", func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
				}), ""},
				{"another priority class in a user namespace", pod("apps", "high", priority("high")), ""},
				{"plain pod in a user namespace", pod("apps", "plain", nil), ""},
				{"system pod in kube-system", pod("kube-system", "addon", func(p *v1.Pod) { critical(p); priority("system-node-critical")(p) }), ""},
				{"pool-scheduler's own namespace", pod("pool-scheduler", "labeler", priority("system-cluster-critical")), ""},
			}
			if src.extra != "" {
				tests = append(tests, struct {
					name    string
					pod     *v1.Pod
					refused string
				}{"extra namespace " + src.extra, pod(src.extra, "agent", critical), ""})
			} else {
				tests = append(tests, struct {
					name    string
					pod     *v1.Pod
					refused string
				}{"monitoring is not a system namespace", pod("monitoring", "agent", critical), "may not tolerate"})
			}
			for _, tt := range tests {
				_, err := cs.CoreV1().Pods(tt.pod.Namespace).Create(tCtx, tt.pod, metav1.CreateOptions{})
				switch {
				case tt.refused == "" && err != nil:
					t.Errorf("%s: refused: %v", tt.name, err)
				case tt.refused != "" && err == nil:
					t.Errorf("%s: allowed, want refused (%q)", tt.name, tt.refused)
				case tt.refused != "" && !strings.Contains(err.Error(), tt.refused):
					t.Errorf("%s: %v, want %q", tt.name, err, tt.refused)
				}
			}

			// Tolerations may be added to a running pod: the policy checks updates too.
			p, err := cs.CoreV1().Pods("apps").Get(tCtx, "plain", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			critical(p)
			if _, err := cs.CoreV1().Pods("apps").Update(tCtx, p, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "may not tolerate") {
				t.Errorf("adding a CriticalAddonsOnly toleration to a running pod in apps: %v, want refused", err)
			}
		})
	}
}
