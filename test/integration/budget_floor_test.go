package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// floorDeployment builds a Deployment of pause pods selected by app=name.
func floorDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: util.ReplicaSet(ns, name, replicas).Spec.Template,
		},
	}
}

// TestBudgetFloor: in a namespace opted in (label pool-scheduler.io/budget-floor=true), the
// floor keeps one PodDisruptionBudget per Deployment and StatefulSet of 3+ replicas without one
// (minAvailable ceil(2r/3), unhealthy pods always evictable, owned by the workload),
// resizes it on scale, and removes it when the workload shrinks below 3, is opted out, gets a
// budget of its user's own, or the namespace leaves (or is the eviction-autoscaler's). It
// corrects a budget of its own edited by hand, recreates one deleted, and leaves workloads
// whose selector overlaps another's alone with a Warning event. With the upstream disruption
// controller the budget holds: of 6 Ready replicas 2 are evicted, the third eviction refused.
func TestBudgetFloor(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	opts := ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	floor.CacheOptions(&opts)
	mgr, err := ctrl.NewManager(cp.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := floor.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(tCtx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	optIn := func(ns string, on bool) {
		t.Helper()
		value := `"true"`
		if !on {
			value = "null"
		}
		if _, err := cs.CoreV1().Namespaces().Patch(tCtx, ns, types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, floor.NamespaceLabel, value)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apps := util.CreateNamespace(tCtx, t, cs, "apps")
	plain := util.CreateNamespace(tCtx, t, cs, "plain")
	// Created before the namespace is opted in and before the workloads the test waits for, so a
	// reconcile that made those budgets had these in its cache.
	mustCreate(t, createDeployment(tCtx, cs, floorDeployment(plain, "web", 3)))
	mustCreate(t, createDeployment(tCtx, cs, floorDeployment(apps, "small", 2)))
	optIn(apps, true)
	mustCreate(t, createDeployment(tCtx, cs, floorDeployment(apps, "web", 3)))

	want := func(ns, name string, minAvailable int32) {
		t.Helper()
		waitFloorBudget(tCtx, t, cs, ns, name+"-budget-floor", func(p *policyv1.PodDisruptionBudget) string {
			switch {
			case p == nil:
				return "no budget"
			case p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != int(minAvailable) || p.Spec.MaxUnavailable != nil:
				return fmt.Sprintf("minAvailable %v, maxUnavailable %v; want minAvailable %d", p.Spec.MinAvailable, p.Spec.MaxUnavailable, minAvailable)
			case ptr.Deref(p.Spec.UnhealthyPodEvictionPolicy, "") != policyv1.AlwaysAllow:
				return fmt.Sprintf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", p.Spec.UnhealthyPodEvictionPolicy)
			case p.Labels[floor.ManagedByLabel] != floor.ManagedBy:
				return fmt.Sprintf("labels %v", p.Labels)
			case metav1.GetControllerOf(p) == nil || metav1.GetControllerOf(p).Name != name:
				return fmt.Sprintf("owners %v, want %s", p.OwnerReferences, name)
			}
			return ""
		})
	}
	none := func(ns, name string) {
		t.Helper()
		waitFloorBudget(tCtx, t, cs, ns, name+"-budget-floor", func(p *policyv1.PodDisruptionBudget) string {
			if p != nil {
				return "a budget"
			}
			return ""
		})
	}
	scale := func(ns, name string, replicas int32) {
		t.Helper()
		if _, err := cs.AppsV1().Deployments(ns).Patch(tCtx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	want(apps, "web", 2)
	for _, ns := range []string{plain, apps} {
		name := map[string]string{plain: "web", apps: "small"}[ns]
		if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(tCtx, name+"-budget-floor", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s/%s: a budget (%v), want none (namespace not opted in, or 2 replicas)", ns, name, err)
		}
	}

	t.Run("resized, removed and restored with the replicas", func(t *testing.T) {
		scale(apps, "web", 7)
		want(apps, "web", 5)
		scale(apps, "web", 2)
		none(apps, "web")
		scale(apps, "web", 6)
		want(apps, "web", 4)
	})

	t.Run("edited by hand: corrected; deleted: recreated", func(t *testing.T) {
		if _, err := cs.PolicyV1().PodDisruptionBudgets(apps).Patch(tCtx, "web-budget-floor", types.MergePatchType, []byte(`{"spec":{"minAvailable":6}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		want(apps, "web", 4)
		if err := cs.PolicyV1().PodDisruptionBudgets(apps).Delete(tCtx, "web-budget-floor", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want(apps, "web", 4)
	})

	t.Run("the user's own budget: the floor steps aside, and back", func(t *testing.T) {
		own := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "web"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(5)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(apps).Create(tCtx, own, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		none(apps, "web")
		if p, err := cs.PolicyV1().PodDisruptionBudgets(apps).Get(tCtx, "web", metav1.GetOptions{}); err != nil || p.Spec.MinAvailable.IntValue() != 5 {
			t.Errorf("the user's budget after the floor stepped aside: %v, %v", p, err)
		}
		if err := cs.PolicyV1().PodDisruptionBudgets(apps).Delete(tCtx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want(apps, "web", 4)
	})

	t.Run("a workload opted out", func(t *testing.T) {
		annotate := func(value string) {
			if _, err := cs.AppsV1().Deployments(apps).Patch(tCtx, "web", types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, floor.Annotation, value)), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		annotate(`"false"`)
		none(apps, "web")
		annotate("null")
		want(apps, "web", 4)
	})

	t.Run("a StatefulSet", func(t *testing.T) {
		d := floorDeployment(apps, "db", 4)
		sts := &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template}}
		if _, err := cs.AppsV1().StatefulSets(apps).Create(tCtx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want(apps, "db", 3)
		p, err := cs.PolicyV1().PodDisruptionBudgets(apps).Get(tCtx, "db-budget-floor", metav1.GetOptions{})
		if err != nil || metav1.GetControllerOf(p).Kind != "StatefulSet" {
			t.Errorf("db's budget: %v, %v; want owned by the StatefulSet", p, err)
		}
	})

	t.Run("overlapping selectors: left alone, with a Warning", func(t *testing.T) {
		mustCreate(t, createDeployment(tCtx, cs, floorDeployment(apps, "api", 3)))
		canary := floorDeployment(apps, "api-canary", 1)
		canary.Spec.Selector.MatchLabels = map[string]string{"app": "api", "track": "canary"}
		canary.Spec.Template.Labels = map[string]string{"app": "api", "track": "canary"}
		mustCreate(t, createDeployment(tCtx, cs, canary))
		// api's own selector (app=api) matches the canary's pods: its budget would count them.
		err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			evs, err := cs.CoreV1().Events(apps).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=api,reason=BudgetFloorSkipped"})
			return err == nil && len(evs.Items) > 0, nil
		})
		if err != nil {
			t.Errorf("no BudgetFloorSkipped event on api within 30 s")
		}
		none(apps, "api")
	})

	t.Run("the namespace opted in later, then the eviction-autoscaler's", func(t *testing.T) {
		optIn(plain, true)
		want(plain, "web", 2)
		if _, err := cs.CoreV1().Namespaces().Patch(tCtx, plain, types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, floor.EvictionAutoscalerAnnotation)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		none(plain, "web")
	})

	t.Run("the budget holds evictions", func(t *testing.T) {
		util.StartKubelet(t, cs)
		util.StartDisruptionController(t, cp)
		// web's 6 replicas: a ReplicaSet the Deployment controls, its pods Ready on a node (no
		// ReplicaSet controller runs: an evicted replica is not replaced during the test).
		d, err := cs.AppsV1().Deployments(apps).Get(tCtx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs := util.ReplicaSet(apps, "web-1", 6)
		rs.Spec.Selector, rs.Spec.Template.Labels = d.Spec.Selector, d.Spec.Template.Labels
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}
		rs, err = cs.AppsV1().ReplicaSets(apps).Create(tCtx, rs, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		util.CreateNode(tCtx, t, cs, util.Node("floor-node", nil).Obj())
		var pods []*v1.Pod
		for i := range 6 {
			p := util.Pod(apps, fmt.Sprintf("web-%d", i)).Node("floor-node").Obj()
			p.Labels = d.Spec.Template.Labels
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
			pods = append(pods, util.CreatePod(tCtx, t, cs, p))
		}
		waitFloorBudget(tCtx, t, cs, apps, "web-budget-floor", func(p *policyv1.PodDisruptionBudget) string {
			if p == nil || p.Status.CurrentHealthy != 6 || p.Status.DisruptionsAllowed != 2 || p.Status.ObservedGeneration != p.Generation {
				return fmt.Sprintf("status %+v, want 6 healthy, 2 disruptions allowed", statusOf(p))
			}
			return ""
		})
		var results []string
		for _, p := range pods[:3] {
			err := evict(tCtx, cs, p, &metav1.DeleteOptions{})
			switch {
			case err == nil:
				results = append(results, "evicted")
			case apierrors.IsTooManyRequests(err):
				results = append(results, "refused")
			default:
				t.Fatalf("evicting %s: %v", p.Name, err)
			}
		}
		if got := strings.Join(results, ","); got != "evicted,evicted,refused" {
			t.Errorf("three evictions of web's 6 Ready replicas: %s, want evicted,evicted,refused (4 = ceil(2x6/3) stay)", got)
		}
	})

	t.Run("the namespace leaves: every budget of the floor there goes", func(t *testing.T) {
		optIn(apps, false)
		none(apps, "web")
		none(apps, "db")
		l, err := cs.PolicyV1().PodDisruptionBudgets(apps).List(tCtx, metav1.ListOptions{LabelSelector: floor.ManagedByLabel + "=" + floor.ManagedBy})
		if err != nil || len(l.Items) != 0 {
			t.Errorf("the floor's budgets left in %s: %v, %v", apps, l, err)
		}
	})
}

func statusOf(p *policyv1.PodDisruptionBudget) any {
	if p == nil {
		return nil
	}
	return p.Status
}

func createDeployment(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) error {
	_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	return err
}

func mustCreate(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFloorBudget waits up to 30 s until check, given the budget (nil: none), returns "".
func waitFloorBudget(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, check func(*policyv1.PodDisruptionBudget) string) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			p = nil
		case err != nil:
			last = err.Error()
			return false, nil
		}
		last = check(p)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("%s/%s after 30 s: %s", ns, name, last)
	}
}
