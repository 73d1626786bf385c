package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestAuditMaintenanceRisks: `poolctl audit` against a real apiserver reports the workloads the
// next upgrade can take below two thirds of their replicas (no budget, replicas packed on few
// nodes) and those whose budgets stop its drains, and none whose budget holds the floor.
func TestAuditMaintenanceRisks(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "maint")
	installShippedConfigMap(tCtx, t, cp)
	// Pool "user": 20 nodes, so the default surge of 10% drains 2 at once.
	for i := range 20 {
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("user-%d", i), map[string]string{
			"kubernetes.azure.com/agentpool": "user", "topology.kubernetes.io/zone": fmt.Sprint(i % 3)}).Obj())
	}
	workload := func(name string, nodes ...int) {
		rs, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(len(nodes))), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for j, n := range nodes {
			p := util.Pod(ns, fmt.Sprintf("%s-%d", name, j)).Node(fmt.Sprintf("user-%d", n)).Labels(map[string]string{"app": name}).Obj()
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
			util.CreatePod(tCtx, t, cs, p)
		}
	}
	budget := func(name string, spec policyv1.PodDisruptionBudgetSpec) {
		spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(tCtx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	one, three := intstr.FromInt32(1), intstr.FromInt32(3)
	workload("packed", 0, 0, 1)  // no budget: a batch of 2 nodes takes all 3
	workload("spread", 0, 5, 10) // no budget, one replica per node: a batch still takes 2 of 3
	workload("guarded", 0, 0, 1) // packed, but its budget lets one go at a time
	budget("guarded", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one})
	workload("stuck", 2, 3, 4) // its budget allows no eviction
	budget("stuck", policyv1.PodDisruptionBudgetSpec{MinAvailable: &three})
	workload("wide", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11) // 12 replicas: a batch takes 2, the floor allows 4

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "-o", "json", "--max-findings", "100")
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, stderr)
	}
	var got report.Report
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("audit -o json is not JSON: %v\n%s", err, stdout)
	}
	var risky []string
	for _, f := range got.MaintenanceRisks {
		risky = append(risky, strings.TrimPrefix(f.Object, ns+"/replicaset/"))
	}
	if diff := cmp.Diff([]string{"packed", "spread", "stuck"}, risky); diff != "" {
		t.Errorf("maintenance risks (-want +got):\n%s\n%+v", diff, got.MaintenanceRisks)
	}
	if got.MaintenanceNote != "" {
		t.Errorf("budgets were read, yet the note says %q", got.MaintenanceNote)
	}

	// A larger surge drains more at once: with 50%, 12 replicas one per node are at risk too.
	stdout, stderr, err = runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "-o", "json", "--max-findings", "100", "--max-surge", "50%")
	if err != nil {
		t.Fatalf("audit --max-surge 50%%: %v\n%s", err, stderr)
	}
	got = report.Report{}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(got.MaintenanceRisks), "replicaset/wide") {
		t.Errorf("--max-surge 50%%: wide not at risk: %+v", got.MaintenanceRisks)
	}
	table, _, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "--max-findings", "100")
	if err != nil || !strings.Contains(table, "MAINTENANCE RISKS") || !strings.Contains(table, "fix: add a PodDisruptionBudget with maxUnavailable 1") {
		t.Errorf("table (err %v):\n%s", err, table)
	}
	if _, _, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "--max-surge", "-3"); err == nil || !strings.Contains(err.Error(), "--max-surge") {
		t.Errorf("--max-surge -3: error %v, want one naming the flag", err)
	}
}
