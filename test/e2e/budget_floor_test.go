package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestBudgetFloorInstalled: bin/pool-labeler spread with the budget floor on, under the account,
// RBAC and admission policy the chart renders with spread.budgetFloor.enabled=true, on an
// RBAC-enforcing apiserver: in a namespace opted in, a Deployment of 3 replicas gets its budget,
// a scale to 6 resizes it, a budget of the user's own replaces it; in a namespace not opted in
// nothing is written. No request of the binary is refused. Then the chart's pre-delete hook,
// bin/pool-labeler under its account, with the keeper still running: the floor's budgets are
// gone and stay gone (its write binding revoked first), the user's own budget stays.
func TestBudgetFloorInstalled(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	const ns = "pool-scheduler"
	objs, _, err := util.RenderChart("v1.34.10", "pool-scheduler", ns, `{spread: {budgetFloor: {enabled: true}}}`)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	var access, hookAccess []*unstructured.Unstructured
	var hookJob *unstructured.Unstructured
	for _, o := range objs {
		if o.GetAnnotations()["helm.sh/hook"] == "pre-delete" {
			if o.GetKind() == "Job" {
				hookJob = o
			} else {
				hookAccess = append(hookAccess, o)
			}
			continue
		}
		if (!strings.HasPrefix(o.GetName(), "pool-scheduler-spread") && o.GetName() != util.BudgetFloorPolicy) || o.GetKind() == "Service" {
			continue
		}
		if o.GetKind() == "Deployment" {
			args = containerArgs(o, nil)
			continue
		}
		access = append(access, o)
	}
	if _, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Logf("applied %v", util.ApplyAccessObjects(tCtx, t, cp, access))
	_, kubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler-spread", nil)
	// The chart's arguments, but for the paths and ports of the pod.
	run := []string{"--kubeconfig=" + kubeconfig, "--leader-elect-namespace=" + ns, "--metrics-bind-address=0", "--health-probe-bind-address=0"}
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		switch flag {
		case "--config":
			run = append(run, "--config="+util.ShippedConfigPath())
		case "--metrics-cert-dir", "--metrics-bind-address", "--health-probe-bind-address":
		default:
			run = append(run, a)
		}
	}
	if !slices.Contains(run, "--budget-floor=true") {
		t.Fatalf("the chart's spread keeper arguments %q lack --budget-floor=true", args)
	}
	proc := util.StartProcess(t, util.LabelerBinary(t), run...)

	newNS := func(prefix string, optIn bool) string {
		n := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
		if optIn {
			n.Labels = map[string]string{floor.NamespaceLabel: "true"}
		}
		got, err := admin.CoreV1().Namespaces().Create(tCtx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Name
	}
	plain, apps := newNS("plain", false), newNS("apps", true)
	deploy := func(n, name string) {
		rs := util.ReplicaSet(n, name, 3)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: rs.Spec.Selector, Template: rs.Spec.Template}}
		if _, err := admin.AppsV1().Deployments(n).Create(tCtx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{plain, apps} {
		deploy(n, "web")
	}
	var wantBudgetOf func(n, workload string, minAvailable int)
	wantBudget := func(n string, minAvailable int) {
		t.Helper()
		wantBudgetOf(n, "web", minAvailable)
	}
	wantBudgetOf = func(n, workload string, minAvailable int) {
		t.Helper()
		last := ""
		err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := admin.PolicyV1().PodDisruptionBudgets(n).Get(ctx, workload+"-budget-floor", metav1.GetOptions{})
			switch {
			case minAvailable == 0:
				last = fmt.Sprintf("%v", err)
				return apierrors.IsNotFound(err), nil
			case err != nil:
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprintf("minAvailable %v", p.Spec.MinAvailable)
			return p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntValue() == minAvailable, nil
		})
		if err != nil {
			t.Fatalf("%s/%s-budget-floor after a minute: %s, want minAvailable %d (0: none)\n%s", n, workload, last, minAvailable, proc.Output())
		}
	}
	wantBudget(apps, 2)
	if _, err := admin.AppsV1().Deployments(apps).Patch(tCtx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":6}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wantBudget(apps, 4)
	own := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := admin.PolicyV1().PodDisruptionBudgets(apps).Create(tCtx, own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantBudget(apps, 0)
	// The namespace not opted in was created first: the floor has judged it by now.
	if l, err := admin.PolicyV1().PodDisruptionBudgets(plain).List(tCtx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("budgets in %s (not opted in): %v, %v; want none", plain, l, err)
	}
	if exited, err := proc.Wait(0); exited {
		t.Errorf("pool-labeler spread exited: %v\n%s", err, proc.Output())
	}
	if m := forbidden.FindAllString(proc.Output(), -1); len(m) > 0 {
		t.Errorf("pool-labeler spread had requests refused:\n%s", grepLinesRe(proc.Output(), forbidden, 10))
	}

	// helm uninstall with the keeper still running: the pre-delete hook, as rendered (its
	// account, RBAC and the floor's policy), revokes the floor's writes and deletes its budgets;
	// none comes back, and the user's own budget stays.
	deploy(apps, "api")
	wantBudgetOf(apps, "api", 2)
	if hookJob == nil {
		t.Fatal("the chart renders no pre-delete hook Job")
	}
	hookArgs := containerArgs(hookJob, nil)
	if !slices.Contains(hookArgs, "--budget-floor-binding=pool-scheduler-spread-budget-floor") {
		t.Fatalf("the hook's arguments %q do not remove the budget floor", hookArgs)
	}
	t.Logf("applied %v", util.ApplyAccessObjects(tCtx, t, cp, hookAccess))
	_, hookKubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler-handback", nil)
	hook := util.StartProcess(t, util.LabelerBinary(t), append(hookArgs, "--kubeconfig="+hookKubeconfig, "--settle=3s", "-v=2")...)
	if exited, err := hook.Wait(3 * time.Minute); !exited || err != nil {
		t.Fatalf("the hook did not finish cleanly (exited %v): %v\n%s", exited, err, hook.Output())
	}
	left, err := admin.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(tCtx, metav1.ListOptions{LabelSelector: floor.ManagedByLabel + "=" + floor.ManagedBy})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("the floor's budgets after the hook: %v, %v; want none\n%s", left, err, hook.Output())
	}
	if _, err := admin.PolicyV1().PodDisruptionBudgets(apps).Get(tCtx, own.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the user's own budget after the hook: %v", err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Get(tCtx, "pool-scheduler-spread-budget-floor", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the floor's write binding after the hook: %v, want gone", err)
	}
	// The keeper, still running, reconciles the deletions and is refused: nothing written back.
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return forbidden.MatchString(proc.Output()), nil
	}); err != nil {
		t.Errorf("the keeper tried no write after the hook (want a refused one, its reconcile of the deletions)\n%s", proc.Output())
	}
	if _, err := admin.PolicyV1().PodDisruptionBudgets(apps).Get(tCtx, "api-budget-floor", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("api-budget-floor after the keeper's reconcile: %v, want none", err)
	}
}
