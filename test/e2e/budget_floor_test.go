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
// nothing is written. No request of the binary is refused.
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
	var access []*unstructured.Unstructured
	for _, o := range objs {
		if !strings.HasPrefix(o.GetName(), "pool-scheduler-spread") || o.GetKind() == "Service" {
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
	for _, n := range []string{plain, apps} {
		rs := util.ReplicaSet(n, "web", 3)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: rs.Spec.Selector, Template: rs.Spec.Template}}
		if _, err := admin.AppsV1().Deployments(n).Create(tCtx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantBudget := func(n string, minAvailable int) {
		t.Helper()
		last := ""
		err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := admin.PolicyV1().PodDisruptionBudgets(n).Get(ctx, "web-budget-floor", metav1.GetOptions{})
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
			t.Fatalf("%s/web-budget-floor after a minute: %s, want minAvailable %d (0: none)\n%s", n, last, minAvailable, proc.Output())
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
}
