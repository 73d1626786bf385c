package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestHelmChartBudgetFloor: with spread.budgetFloor.enabled the chart grants the spread keeper's
// account PodDisruptionBudget writes, and its ValidatingAdmissionPolicy refuses, on the real
// apiserver, every write outside the budgets the floor keeps: a budget without the floor's label,
// one not controlled by a Deployment or StatefulSet, one with maxUnavailable or a percentage, one
// holding unhealthy pods, one selecting every pod, one not named <workload>-budget-floor, one in
// a namespace not opted in; changing, relabelling or deleting a user's budget. The floor's own
// budget is created, resized and deleted. The uninstall hook's account may delete the floor's
// budget and its write binding, and is refused a user's budget (the policy), a budget of its own
// and any other binding (RBAC). Without the value, RBAC refuses every budget write by the
// account.
func TestHelmChartBudgetFloor(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	apps := util.CreateNamespace(tCtx, t, admin, "apps")
	plain := util.CreateNamespace(tCtx, t, admin, "plain")
	if _, err := admin.CoreV1().Namespaces().Patch(tCtx, apps, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+floor.NamespaceLabel+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "5e1d0a2e-0000-4000-8000-000000000058", Controller: ptr.To(true)}
	budget := func(name string, edit func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
		p := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: name, Labels: map[string]string{floor.ManagedByLabel: floor.ManagedBy}, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: policyv1.PodDisruptionBudgetSpec{
				Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				MinAvailable:               ptr.To(intstr.FromInt32(2)),
				UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
			},
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	users, err := admin.PolicyV1().PodDisruptionBudgets(apps).Create(tCtx, budget("users", func(p *policyv1.PodDisruptionBudget) {
		p.Labels, p.OwnerReferences = map[string]string{"team": "a"}, nil
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("floor on", func(t *testing.T) {
		keeper, ids := spreadKeeperAccess(tCtx, t, cp, chartNamespace, "pool-scheduler", `{spread: {budgetFloor: {enabled: true}}}`)
		t.Logf("applied %v", ids)
		pdbs := keeper.PolicyV1().PodDisruptionBudgets(apps)
		create := func(p *policyv1.PodDisruptionBudget) func(context.Context) error {
			return func(ctx context.Context) error { _, err := pdbs.Create(ctx, p, metav1.CreateOptions{}); return err }
		}
		// update changes a budget as the floor does (a read, then an update: it is granted no patch).
		update := func(name string, edit func(*policyv1.PodDisruptionBudget)) func(context.Context) error {
			return func(ctx context.Context) error {
				p, err := admin.PolicyV1().PodDisruptionBudgets(apps).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				edit(p)
				_, err = pdbs.Update(ctx, p, metav1.UpdateOptions{})
				return err
			}
		}
		minAvailable := func(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
			return func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = &v }
		}
		// The policy is enforced once the apiserver has loaded it: until then an unlabelled
		// probe would be created.
		if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err := update(users.Name, func(p *policyv1.PodDisruptionBudget) { p.Labels["probe"] = time.Now().Format("150405.000") })(ctx)
			return err != nil && strings.Contains(err.Error(), "only change or delete the PodDisruptionBudgets it keeps"), nil
		}); err != nil {
			t.Fatalf("the budget floor's admission policy is not enforced within 30 s")
		}

		if err := create(budget("web-budget-floor", nil))(tCtx); err != nil {
			t.Errorf("the floor creating its budget: %v", err)
		}
		if err := update("web-budget-floor", minAvailable(intstr.FromInt32(4)))(tCtx); err != nil {
			t.Errorf("the floor resizing its budget: %v", err)
		}
		refusals := []struct {
			name, message string
			do            func(context.Context) error
		}{
			{"a budget without the floor's label", "must be labelled app.kubernetes.io/managed-by=pool-scheduler-budget-floor",
				create(budget("unlabelled", func(p *policyv1.PodDisruptionBudget) { p.Labels = nil }))},
			{"a budget without an owner", "controlled by one Deployment or StatefulSet",
				create(budget("orphan", func(p *policyv1.PodDisruptionBudget) { p.OwnerReferences = nil }))},
			{"a budget owned by a Pod", "controlled by one Deployment or StatefulSet",
				create(budget("pod-owned", func(p *policyv1.PodDisruptionBudget) {
					p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "5e1d0a2e-0000-4000-8000-000000000059", Controller: ptr.To(true)}}
				}))},
			{"maxUnavailable", "must set an integer minAvailable", create(budget("max", func(p *policyv1.PodDisruptionBudget) {
				p.Spec.MinAvailable, p.Spec.MaxUnavailable = nil, ptr.To(intstr.FromInt32(1))
			}))},
			{"minAvailable as a percentage", "must set an integer minAvailable", update("web-budget-floor", minAvailable(intstr.FromString("50%")))},
			{"an empty selector (every pod of the namespace)", "select pods by labels", create(budget("all-budget-floor", func(p *policyv1.PodDisruptionBudget) {
				p.Spec.Selector = &metav1.LabelSelector{}
			}))},
			{"a name not its own", "must be named <workload>-budget-floor", create(budget("web", nil))},
			{"a namespace not opted in", "in a namespace labelled pool-scheduler.io/budget-floor=true", func(ctx context.Context) error {
				p := budget("web-budget-floor", nil)
				p.Namespace = plain
				_, err := keeper.PolicyV1().PodDisruptionBudgets(plain).Create(ctx, p, metav1.CreateOptions{})
				return err
			}},
			{"unhealthy pods held", "unhealthyPodEvictionPolicy AlwaysAllow", update("web-budget-floor", func(p *policyv1.PodDisruptionBudget) {
				p.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
			})},
			{"changing a user's budget", "only change or delete the PodDisruptionBudgets it keeps", update(users.Name, minAvailable(intstr.FromInt32(3)))},
			{"labelling a user's budget as the floor's", "only change or delete the PodDisruptionBudgets it keeps",
				update(users.Name, func(p *policyv1.PodDisruptionBudget) { p.Labels[floor.ManagedByLabel] = floor.ManagedBy })},
			{"deleting a user's budget", "only change or delete the PodDisruptionBudgets it keeps", func(ctx context.Context) error {
				return pdbs.Delete(ctx, users.Name, metav1.DeleteOptions{})
			}},
		}
		for _, r := range refusals {
			wantRefused(t, r.name, r.message, r.do(tCtx))
		}
		got, err := admin.PolicyV1().PodDisruptionBudgets(apps).Get(tCtx, users.Name, metav1.GetOptions{})
		if err != nil || got.Spec.MinAvailable.IntValue() != 2 || got.Labels[floor.ManagedByLabel] != "" {
			t.Errorf("the user's budget after the refused writes: %v, %v", got, err)
		}
		if err := pdbs.Delete(tCtx, "web-budget-floor", metav1.DeleteOptions{}); err != nil {
			t.Errorf("the floor deleting its budget: %v", err)
		}

		// The uninstall hook's account: it deletes the floor's budgets and its write binding,
		// nothing else.
		r, err := renderChart(t, chartNamespace, `{spread: {budgetFloor: {enabled: true}}}`)
		if err != nil {
			t.Fatal(err)
		}
		var hookAccess []*unstructured.Unstructured
		for _, o := range r.objects {
			if o.GetAnnotations()["helm.sh/hook"] == "pre-delete" && o.GetKind() != "Job" {
				hookAccess = append(hookAccess, o)
			}
		}
		util.ApplyAccessObjects(tCtx, t, cp, hookAccess)
		hookCfg, _ := util.ServiceAccountConfig(tCtx, t, cp, chartNamespace, "pool-scheduler-handback", nil)
		hook := kubernetes.NewForConfigOrDie(hookCfg)
		// Its RBAC reaches the authorizer's cache in a moment: until then a refusal is not the
		// policy's.
		if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := hook.PolicyV1().PodDisruptionBudgets(apps).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		}); err != nil {
			t.Fatalf("the uninstall hook's account cannot list budgets within 30 s")
		}
		if err := create(budget("web-budget-floor", nil))(tCtx); err != nil {
			t.Fatalf("the floor creating its budget again: %v", err)
		}
		hookRefusals := []struct {
			name, message string
			do            func(context.Context) error
		}{
			{"deleting a user's budget", "only change or delete the PodDisruptionBudgets it keeps", func(ctx context.Context) error {
				return hook.PolicyV1().PodDisruptionBudgets(apps).Delete(ctx, users.Name, metav1.DeleteOptions{})
			}},
			{"creating a budget", `cannot create resource "poddisruptionbudgets"`, func(ctx context.Context) error {
				p := budget("api-budget-floor", nil)
				_, err := hook.PolicyV1().PodDisruptionBudgets(apps).Create(ctx, p, metav1.CreateOptions{})
				return err
			}},
			{"deleting another binding", `cannot delete resource "clusterrolebindings"`, func(ctx context.Context) error {
				return hook.RbacV1().ClusterRoleBindings().Delete(ctx, "pool-scheduler-spread", metav1.DeleteOptions{})
			}},
		}
		for _, r := range hookRefusals {
			wantRefused(t, "the uninstall hook "+r.name, r.message, r.do(tCtx))
		}
		if err := hook.PolicyV1().PodDisruptionBudgets(apps).Delete(tCtx, "web-budget-floor", metav1.DeleteOptions{}); err != nil {
			t.Errorf("the uninstall hook deleting the floor's budget: %v", err)
		}
		if err := hook.RbacV1().ClusterRoleBindings().Delete(tCtx, "pool-scheduler-spread-budget-floor", metav1.DeleteOptions{}); err != nil {
			t.Errorf("the uninstall hook revoking the floor's writes: %v", err)
		}
	})

	t.Run("floor off", func(t *testing.T) {
		keeper, ids := spreadKeeperAccess(tCtx, t, cp, "floor-off", "floor-off", `{scheduler: {name: floor-off}}`)
		for _, id := range ids {
			if strings.Contains(id, "budget-floor") {
				t.Errorf("rendered %s: no budget floor policy wanted with the floor off", id)
			}
		}
		// RBAC answers at once: a refusal by it is not the policy's late loading.
		_, err := keeper.PolicyV1().PodDisruptionBudgets(apps).Create(tCtx, budget("web-budget-floor", nil), metav1.CreateOptions{})
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot create resource "poddisruptionbudgets"`) {
			t.Errorf("creating a budget with the floor off: %v, want forbidden by RBAC", err)
		}
	})
}

// wantRefused fails unless err is a refusal (RBAC's Forbidden, or admission's) saying message.
func wantRefused(t *testing.T, what, message string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want refused", what)
	case !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) || !strings.Contains(err.Error(), message):
		t.Errorf("%s: %v, want refused (%q)", what, err, message)
	default:
		t.Logf("%s: refused: %v", what, err)
	}
}
