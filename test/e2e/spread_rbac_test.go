package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// checkSpreadKeeperWrites installs what manifests/spread grants the spread keeper (its
// ServiceAccount, RBAC and admission policy) and, with its token, writes to a pod: the
// pod-deletion-cost annotation is allowed; any other change to the pod is refused by the policy,
// and deleting or evicting pods, writing pod status or patching nodes by RBAC.
func checkSpreadKeeperWrites(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	admin := cp.Client
	const ns = "pool-scheduler"
	t.Logf("applied from manifests/spread: %v", util.ApplyAccessObjects(ctx, t, cp, util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "spread"))))
	saCfg, saKubeconfig := util.ServiceAccountConfig(ctx, t, cp, ns, "pool-scheduler-spread", nil)
	keeper := clientFor(t, saCfg)
	waitAllowed(ctx, t, keeper, "pool-scheduler-spread", []authorizationv1.ResourceAttributes{
		{Verb: "patch", Resource: "pods", Namespace: "default"},
		{Verb: "watch", Resource: "nodes"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: spreadkeeper.LeaseName},
	})
	app := util.CreateNamespace(ctx, t, admin, "spread-rbac")
	pod := util.CreatePod(ctx, t, admin, util.Pod(app, "web-0").Label("app", "web").Annotation("team", "a").Obj())
	patch := func(body string, subresources ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := keeper.CoreV1().Pods(app).Patch(ctx, pod.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresources...)
			return err
		}
	}
	setCost := func(cost int) error {
		return patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, spread.DeletionCostAnnotation, cost))(ctx)
	}
	// The policy is enforced once the apiserver has loaded it: until then a probe pod's label change goes through.
	probe := util.CreatePod(ctx, t, admin, util.Pod(app, "probe").Obj())
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := keeper.CoreV1().Pods(app).Patch(ctx, probe.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"`+time.Now().Format("150405.000")+`"}}}`), metav1.PatchOptions{})
		return err != nil && strings.Contains(err.Error(), "may not change a pod's labels"), nil
	}); err != nil {
		t.Fatalf("the spread keeper's admission policy is not enforced within 30 s")
	}

	if err := setCost(1024); err != nil {
		t.Errorf("spread keeper writing the pod-deletion-cost annotation: %v", err)
	}
	refusals := []struct {
		name    string
		do      func(context.Context) error
		message string
	}{
		{"spread keeper changes a pod's label", patch(`{"metadata":{"labels":{"app":"stolen"}}}`), "may not change a pod's labels or spec"},
		{"spread keeper changes another annotation", patch(`{"metadata":{"annotations":{"team":"b"}}}`), "may only change the annotation controller.kubernetes.io/pod-deletion-cost"},
		{"spread keeper adds an annotation with the cost", patch(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"5","extra":"x"}}}`), "may only change the annotation controller.kubernetes.io/pod-deletion-cost"},
		{"spread keeper adds a finalizer", patch(`{"metadata":{"finalizers":["example.com/hold"]}}`), "may not change a pod's finalizers or ownerReferences"},
		{"spread keeper writes pod status", patch(`{"status":{"phase":"Failed"}}`, "status"), "forbidden"},
		{"spread keeper deletes a pod", func(ctx context.Context) error {
			return keeper.CoreV1().Pods(app).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		}, "forbidden"},
		{"spread keeper labels a node", func(ctx context.Context) error {
			_, err := keeper.CoreV1().Nodes().Patch(ctx, "spot-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		}, "forbidden"},
		// manifests/spread runs no rebalancer: no eviction right (the chart's is bounded by a policy:
		// TestHelmChartSpreadEvictions).
		{"spread keeper evicts a pod", func(ctx context.Context) error {
			return keeper.PolicyV1().Evictions(app).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: pod.Name}})
		}, "forbidden"},
		{"spread keeper creates a pod", func(ctx context.Context) error {
			_, err := keeper.CoreV1().Pods(app).Create(ctx, util.Pod(app, "extra").Obj(), metav1.CreateOptions{})
			return err
		}, "forbidden"},
	}
	for _, r := range refusals {
		err := r.do(ctx)
		switch {
		case err == nil:
			t.Errorf("%s: allowed, want refused", r.name)
		case !strings.Contains(err.Error(), r.message) || (r.message == "forbidden" && !apierrors.IsForbidden(err)):
			t.Errorf("%s: %v, want refused (%q)", r.name, err, r.message)
		default:
			t.Logf("%s: refused: %v", r.name, err)
		}
	}
	got, err := admin.CoreV1().Pods(app).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"team": "a", spread.DeletionCostAnnotation: "1024"}
	if got.Labels["app"] != "web" || len(got.Annotations) != 2 || got.Annotations["team"] != want["team"] || got.Annotations[spread.DeletionCostAnnotation] != want[spread.DeletionCostAnnotation] || got.Status.Phase == v1.PodFailed {
		t.Errorf("pod after the spread keeper's writes: labels %v, annotations %v, phase %s; want app=web, %v, not Failed", got.Labels, got.Annotations, got.Status.Phase, want)
	}

	// The binary under the same identity: two replicas of a ReplicaSet get their costs, with no
	// request refused.
	proc := util.StartProcess(t, util.LabelerBinary(t), "spread", "--kubeconfig="+saKubeconfig, "--config="+util.ShippedConfigPath(),
		"--leader-elect-namespace="+ns, "--settle=100ms", "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "5e1d0a2e-0000-4000-8000-000000000035", Controller: ptr.To(true)}
	for i, node := range []string{"spot-0", "spot-1"} {
		p := util.Pod(app, fmt.Sprintf("web-%c", 'a'+i)).Node(node).Obj()
		p.OwnerReferences = []metav1.OwnerReference{owner}
		util.CreatePod(ctx, t, admin, p)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := admin.CoreV1().Pods(app).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		costs := 0
		for _, p := range pods.Items {
			if _, ok := p.Annotations[spread.DeletionCostAnnotation]; ok && len(p.OwnerReferences) > 0 {
				costs++
			}
		}
		return costs == 2, nil
	}); err != nil {
		t.Errorf("pool-labeler spread did not write both replicas' deletion costs within a minute:\n%s", proc.Output())
	}
	if exited, err := proc.Wait(0); exited {
		t.Errorf("pool-labeler spread exited: %v\n%s", err, proc.Output())
	}
	if m := forbidden.FindAllString(proc.Output(), -1); len(m) > 0 {
		t.Errorf("pool-labeler spread had requests refused:\n%s", grepLinesRe(proc.Output(), forbidden, 10))
	}
}
