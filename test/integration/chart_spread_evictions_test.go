package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// spreadKeeperAccess renders the chart with values into namespace and creates what it grants the
// spread keeper (the objects named <scheduler>-spread*, but its Deployment and Service, and the
// budget floor's policy, named without the release: one per cluster), and returns a client with
// the keeper's token and the names of the objects.
func spreadKeeperAccess(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, namespace, scheduler, values string) (kubernetes.Interface, []string) {
	t.Helper()
	r, err := renderChart(t, namespace, values)
	if err != nil {
		t.Fatalf("rendering %s: %v", values, err)
	}
	ensureNamespace(ctx, t, cp, namespace)
	var objs []*unstructured.Unstructured
	var ids []string
	for _, o := range r.objects {
		keeper := strings.HasPrefix(o.GetName(), scheduler+"-spread") && o.GetKind() != "Deployment" && o.GetKind() != "Service"
		if keeper || o.GetName() == util.BudgetFloorPolicy {
			objs = append(objs, o)
			ids = append(ids, objectID(o))
		}
	}
	util.ApplyAccessObjects(ctx, t, cp, objs)
	cfg, _ := util.ServiceAccountConfig(ctx, t, cp, namespace, scheduler+"-spread", nil)
	return kubernetes.NewForConfigOrDie(cfg), ids
}

// evict evicts pod as the rebalancer does (the pod's UID as precondition), or with opts.
func evict(ctx context.Context, cs kubernetes.Interface, pod *v1.Pod, opts *metav1.DeleteOptions) error {
	if opts == nil {
		opts = &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	}
	return cs.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, DeleteOptions: opts})
}

// TestHelmChartSpreadEvictions: the chart grants the spread keeper's account pods/eviction only
// with the rebalancer on and not a dry run, and then its ValidatingAdmissionPolicy refuses, on
// the real apiserver, every eviction by that account outside its bound: in kube-system, in the
// release namespace, in SystemPoolGuard's systemNamespaces and admission.excludedNamespaces, in
// a namespace not opted in to pool-scheduler, without the pod's UID or with a grace period of
// its own. Inside the bound (a labelled namespace, one listed in admission.namespaces) the
// eviction goes through and the pod is gone. With the rebalancer off or in its dry run, RBAC
// refuses every eviction by the account.
func TestHelmChartSpreadEvictions(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	namespace := func(name string, labels map[string]string) string {
		if _, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		return name
	}
	optedIn := map[string]string{profile.NamespaceLabel: "true"}
	labelled := namespace("apps", optedIn)
	listed := namespace("listed", nil)
	plain := namespace("plain", nil)
	// Opted in by the label, but excluded or a system namespace: the exclusion wins.
	excluded := namespace("batch-excluded", optedIn)
	system := namespace("platform", optedIn)
	if _, err := admin.CoreV1().Namespaces().Patch(tCtx, "kube-system", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"`+profile.NamespaceLabel+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var n int
	newPod := func(ns string) *v1.Pod {
		n++
		return util.CreatePod(tCtx, t, admin, util.Pod(ns, fmt.Sprintf("p-%d", n)).Obj())
	}

	t.Run("rebalancer evicting", func(t *testing.T) {
		values := `{spread: {rebalance: {enabled: true, dryRun: false}}, admission: {namespaces: [listed], excludedNamespaces: [kube-system, batch-excluded]},
			scheduler: {plugins: {systemPoolGuard: {args: {systemNamespaces: [kube-system, platform]}}}}}`
		keeper, ids := spreadKeeperAccess(tCtx, t, cp, chartNamespace, "pool-scheduler", values)
		t.Logf("applied %v", ids)
		releasePod := newPod(chartNamespace)
		// The policy is enforced once the apiserver has loaded it: until then a probe in a
		// namespace outside the bound would be evicted.
		var probe *v1.Pod
		if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if probe == nil {
				probe = newPod(plain)
			}
			err := evict(ctx, keeper, probe, nil)
			if err == nil {
				probe = nil
			}
			return err != nil && strings.Contains(err.Error(), "only evict pods in namespaces opted in"), nil
		}); err != nil {
			t.Fatalf("the spread keeper's eviction policy is not enforced within 30 s")
		}
		refusals := []struct {
			name    string
			pod     *v1.Pod
			opts    *metav1.DeleteOptions
			message string
		}{
			{"kube-system (labelled)", newPod("kube-system"), nil, "may not evict pods in the namespace kube-system"},
			{"the release namespace", releasePod, nil, "may not evict pods in the namespace " + chartNamespace},
			{"a systemNamespaces namespace (labelled)", newPod(system), nil, "may not evict pods in the namespace platform"},
			{"an excluded namespace (labelled)", newPod(excluded), nil, "may not evict pods in the namespace batch-excluded"},
			{"a namespace not opted in", newPod(plain), nil, "only evict pods in namespaces opted in"},
			{"no UID precondition", newPod(labelled), &metav1.DeleteOptions{}, "must name the pod's UID"},
			{"a grace period of its own", newPod(labelled), nil, "must name the pod's UID and may not set a grace period"},
		}
		refusals[6].opts = &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(refusals[6].pod.UID)), GracePeriodSeconds: ptr.To[int64](0)}
		for _, r := range refusals {
			err := evict(tCtx, keeper, r.pod, r.opts)
			switch {
			case err == nil:
				t.Errorf("%s: evicted, want refused", r.name)
			case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), r.message):
				t.Errorf("%s: %v, want refused (%q)", r.name, err, r.message)
			default:
				t.Logf("%s: refused: %v", r.name, err)
			}
			if _, err := admin.CoreV1().Pods(r.pod.Namespace).Get(tCtx, r.pod.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s: the pod after the refused eviction: %v", r.name, err)
			}
		}
		for _, ns := range []string{labelled, listed} {
			pod := newPod(ns)
			if err := evict(tCtx, keeper, pod, nil); err != nil {
				t.Errorf("evicting a pod in %s (inside the bound): %v", ns, err)
				continue
			}
			err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Errorf("pod %s/%s still there after its eviction", ns, pod.Name)
			}
		}
	})

	for _, tt := range []struct{ name, scheduler, values string }{
		{"rebalancer off", "keeper-off", `{scheduler: {name: keeper-off}}`},
		{"rebalancer in its dry run", "keeper-dry", `{scheduler: {name: keeper-dry}, spread: {rebalance: {enabled: true}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keeper, ids := spreadKeeperAccess(tCtx, t, cp, tt.scheduler, tt.scheduler, tt.values)
			for _, id := range ids {
				if strings.Contains(id, "evictions") {
					t.Errorf("rendered %s: no eviction policy wanted without evictions", id)
				}
			}
			for _, ns := range []string{labelled, listed, plain} {
				pod := newPod(ns)
				// RBAC answers at once: a refusal by it is not the policy's late loading.
				err := evict(tCtx, keeper, pod, nil)
				if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot create resource "pods/eviction"`) {
					t.Errorf("evicting a pod in %s: %v, want forbidden by RBAC", ns, err)
				}
			}
		})
	}
}
