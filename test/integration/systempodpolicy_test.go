package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestSystemPodPolicy: the optional ValidatingAdmissionPolicy (manifests/policies/system-pods,
// and the chart's scheduler.plugins.systemPoolGuard.admissionPolicy) refuses pods outside the
// system namespaces that tolerate CriticalAddonsOnly, use a system priority class or carry an
// apps DaemonSet controller reference the DaemonSet controller did not write, the marks
// SystemPoolGuard takes at the pod's word, and lets every other pod through, against a real
// kube-apiserver; the upstream DaemonSet controller creates and adopts its pods under it; an
// UPDATE that changes none of the marks is never refused (a pod admitted before the policy can
// lose its finalizer and terminate).
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
			// Pods admitted before the policy (or under an older one): whatever they claim, an
			// UPDATE that does not change it is never refused, so they can always terminate.
			legacy := util.Pod("apps", "legacy").Obj()
			legacy.Spec.PriorityClassName = "system-node-critical"
			legacy.Spec.Tolerations = []v1.Toleration{{Key: "CriticalAddonsOnly", Operator: v1.TolerationOpExists}}
			legacy.OwnerReferences = []metav1.OwnerReference{forgedDaemonSetRef()}
			legacy.Finalizers = []string{"example.com/hold"}
			if _, err := cs.CoreV1().Pods("apps").Create(tCtx, legacy, metav1.CreateOptions{}); err != nil {
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
				}), "may not tolerate every taint"},
				{"wildcard NoSchedule toleration in a user namespace", pod("apps", "wildcard-noschedule", func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
				}), "may not tolerate every taint"},
				{"wildcard NoExecute toleration in a user namespace (the system taint is NoSchedule)", pod("apps", "wildcard-noexecute", func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
				}), ""},
				{"wildcard toleration in a system namespace", pod("kube-system", "wildcard-system", func(p *v1.Pod) {
					p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
				}), ""},
				{"another priority class in a user namespace", pod("apps", "high", priority("high")), ""},
				{"plain pod in a user namespace", pod("apps", "plain", nil), ""},
				{"forged apps/v1 DaemonSet controller reference in a user namespace", pod("apps", "forged", daemonSetRef(forgedDaemonSetRef())),
					"may carry an apps DaemonSet controller reference only when the DaemonSet controller writes it"},
				{"forged apps/v1beta2 DaemonSet controller reference", pod("apps", "forged-beta", daemonSetRef(func() metav1.OwnerReference {
					r := forgedDaemonSetRef()
					r.APIVersion = "apps/v1beta2"
					return r
				}())), "may carry an apps DaemonSet controller reference"},
				{"a DaemonSet reference that is not the controller", pod("apps", "owned-not-controlled", daemonSetRef(func() metav1.OwnerReference {
					r := forgedDaemonSetRef()
					r.Controller = nil
					return r
				}())), ""},
				{"a DaemonSet controller of another API group", pod("apps", "other-group", daemonSetRef(func() metav1.OwnerReference {
					r := forgedDaemonSetRef()
					r.APIVersion = "example.com/v1"
					return r
				}())), ""},
				{"system pod in kube-system", pod("kube-system", "addon", func(p *v1.Pod) { critical(p); priority("system-node-critical")(p) }), ""},
				{"DaemonSet pod in kube-system, whoever writes it", pod("kube-system", "agent", daemonSetRef(forgedDaemonSetRef())), ""},
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
			// Nor may anyone but the DaemonSet controller add a DaemonSet controller reference.
			p, err = cs.CoreV1().Pods("apps").Get(tCtx, "plain", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.OwnerReferences = []metav1.OwnerReference{forgedDaemonSetRef()}
			if _, err := cs.CoreV1().Pods("apps").Update(tCtx, p, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "may carry an apps DaemonSet controller reference") {
				t.Errorf("adding a DaemonSet controller reference to a running pod in apps: %v, want refused", err)
			}

			checkLegacyPodTerminates(tCtx, t, cs)
			checkDaemonSetController(tCtx, t, cp)
		})
	}
}

// forgedDaemonSetRef is an apps/v1 DaemonSet controller reference to a DaemonSet that does not exist.
func forgedDaemonSetRef() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "forged", UID: "5d1f0d4e-7a55-4b9f-9f5e-6f3c2f0a9b11", Controller: ptr.To(true)}
}

func daemonSetRef(ref metav1.OwnerReference) func(*v1.Pod) {
	return func(p *v1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ref} }
}

// checkLegacyPodTerminates: a pod admitted before the policy with every system mark (a system
// priority class, a CriticalAddonsOnly toleration, a DaemonSet controller reference) and a
// finalizer can still be relabelled, and deleted: removing its finalizer is not refused, so it
// does not stay Terminating.
func checkLegacyPodTerminates(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	if _, err := cs.CoreV1().Pods("apps").Patch(ctx, "legacy", types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/note":"x"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("relabelling a pod admitted before the policy: %v, want allowed", err)
	}
	if err := cs.CoreV1().Pods("apps").Delete(ctx, "legacy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("apps").Patch(ctx, "legacy", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Errorf("removing the finalizer of a terminating pod admitted before the policy: %v, want allowed", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods("apps").Get(ctx, "legacy", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the pod admitted before the policy is still there (Terminating): %v", err)
	}
}

// checkDaemonSetController runs the upstream DaemonSet controller in process as kube-controller-
// manager runs it with --use-service-account-credentials (the ServiceAccount
// kube-system/daemon-set-controller's token): under the policy it creates its pod (with a
// wildcard toleration, as node agents carry) on one node
// and adopts an orphan pod that matches its selector on the other (a patch adding its controller
// reference). kube-controller-manager's own identity (--use-service-account-credentials=false)
// may write the reference too.
func checkDaemonSetController(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	cs := cp.Client
	if _, err := cs.CoreV1().ServiceAccounts("kube-system").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "daemon-set-controller"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"agent-0", "agent-1"} {
		util.CreateNode(ctx, t, cs, util.Node(n, nil).Obj())
	}
	labels := map[string]string{"app": "agent"}
	orphan := util.Pod("apps", "orphan").Obj()
	orphan.Labels, orphan.Spec.NodeName = labels, "agent-1"
	if _, err := cs.CoreV1().Pods("apps").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, err := cs.AppsV1().DaemonSets("apps").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// A node agent's wildcard toleration: the DaemonSet controller's pods may carry it.
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}},
					Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saCfg, _ := util.ServiceAccountConfig(ctx, t, cp, "kube-system", "daemon-set-controller", nil)
	dsClient := kubernetes.NewForConfigOrDie(saCfg)
	factory := informers.NewSharedInformerFactory(dsClient, 0)
	dsc, err := daemon.NewDaemonSetsController(ctx, factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), dsClient, flowcontrol.NewBackOff(time.Second, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(runCtx.Done())
	go dsc.Run(runCtx, 1)
	controlled := func(p *v1.Pod) bool {
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == ds.UID
	}
	var pods []v1.Pod
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods("apps").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		n := 0
		for i := range pods {
			if controlled(&pods[i]) {
				n++
			}
		}
		return n == 2, nil
	})
	if err != nil {
		var names []string
		for _, p := range pods {
			names = append(names, fmt.Sprintf("%s (controller %v)", p.Name, metav1.GetControllerOf(&p)))
		}
		t.Fatalf("the DaemonSet controller did not create its pod and adopt the orphan under the policy: %v; pods %v", err, names)
	}

	kcm := rest.CopyConfig(cp.Config)
	kcm.Impersonate = rest.ImpersonationConfig{UserName: "system:kube-controller-manager"}
	p := util.Pod("apps", "kcm-agent").Obj()
	p.OwnerReferences = []metav1.OwnerReference{forgedDaemonSetRef()}
	if _, err := kubernetes.NewForConfigOrDie(kcm).CoreV1().Pods("apps").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Errorf("kube-controller-manager's own identity creating a DaemonSet pod: %v, want allowed", err)
	}
}
