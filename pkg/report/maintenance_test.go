package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

func TestFloorAndBatchSize(t *testing.T) {
	for r, want := range map[int]int{3: 2, 4: 3, 5: 4, 6: 4, 12: 8, 30: 20} {
		if got := Floor(r); got != want {
			t.Errorf("Floor(%d) = %d, want %d", r, got, want)
		}
	}
	tests := []struct {
		surge intstr.IntOrString
		n     int
		want  int
	}{
		{surge: DefaultMaxSurge, n: 100, want: 10},
		{surge: DefaultMaxSurge, n: 30, want: 3},
		{surge: DefaultMaxSurge, n: 3, want: 1},
		{surge: intstr.FromString("33%"), n: 10, want: 4},
		{surge: intstr.FromInt32(5), n: 3, want: 3},
		{surge: intstr.FromInt32(0), n: 3, want: 1},
	}
	for _, tt := range tests {
		if got := BatchSize(tt.surge, tt.n); got != tt.want {
			t.Errorf("BatchSize(%s, %d) = %d, want %d", tt.surge.String(), tt.n, got, tt.want)
		}
	}
}

func TestMaintenanceRisks(t *testing.T) {
	const oldImage, newImage = "AKSUbuntu-2204gen2containerd-202409.30.0", "AKSUbuntu-2204gen2containerd-202410.27.0"
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// 30 nodes of pool "user" (batch 3), the last two surge nodes of an upgrade under way.
	var nodes []*v1.Node
	for i := range 30 {
		n := vmssNode("user", i, fmt.Sprintf("westeurope-%d", i%3+1), "0")
		n.Labels[maintenance.NodeImageVersionLabel] = oldImage
		n.CreationTimestamp = metav1.NewTime(created)
		if i >= 28 {
			n.Labels[maintenance.NodeImageVersionLabel] = newImage
			n.CreationTimestamp = metav1.NewTime(created.Add(time.Hour))
		}
		nodes = append(nodes, n)
	}
	nodeName := func(i int) string { return nodes[i].Name }
	// replicas of ReplicaSet rs (labels app=rs) on the given node indexes.
	replicas := func(rs string, on ...int) []*v1.Pod {
		var pods []*v1.Pod
		for j, i := range on {
			pods = append(pods, st.MakePod().Namespace("shop").Name(fmt.Sprintf("%s-%d", rs, j)).Label("app", rs).
				OwnerReference(rs, v1.SchemeGroupVersion.WithKind("ReplicaSet")).Node(nodeName(i)).Obj())
		}
		return pods
	}
	pdb := func(name, app string, maxUnavailable *intstr.IntOrString, minAvailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, MaxUnavailable: maxUnavailable, MinAvailable: minAvailable}}
	}
	one, all := intstr.FromInt32(1), intstr.FromString("100%")
	tests := []struct {
		name string
		pods []*v1.Pod
		pdbs []*policyv1.PodDisruptionBudget
		want []string
	}{
		{name: "two replicas: no floor to keep", pods: replicas("two", 0, 1)},
		{name: "three replicas, no budget: a batch of 3 nodes can take them all", pods: replicas("web", 0, 1, 2),
			want: []string{`an upgrade batch (3 nodes of pool "user", drained at once) can take 3 of 3 replicas; no PodDisruptionBudget, floor 2`}},
		{name: "a budget of one holds the floor", pods: replicas("web", 0, 1, 2), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", "web", &one, nil)}},
		{name: "a budget allowing all is no help", pods: replicas("web", 0, 1, 2), pdbs: []*policyv1.PodDisruptionBudget{pdb("web", "web", &all, nil)},
			want: []string{`an upgrade batch (3 nodes of pool "user", drained at once) can take 3 of 3 replicas; its PodDisruptionBudget allows 3, floor 2`}},
		{name: "minAvailable equal to the replicas blocks every drain", pods: replicas("db", 0, 1, 2), pdbs: []*policyv1.PodDisruptionBudget{pdb("db", "db", nil, ptrTo(intstr.FromInt32(3)))},
			want: []string{"its PodDisruptionBudget allows no eviction of its 3 replicas: an upgrade's drain of their nodes is refused until drainTimeout (AKS: 30 min), then the upgrade fails or quarantines the node"}},
		{name: "two budgets: the Eviction API refuses", pods: replicas("db", 0, 1, 2), pdbs: []*policyv1.PodDisruptionBudget{pdb("a", "db", &one, nil), pdb("b", "db", &one, nil)},
			want: []string{"2 PodDisruptionBudgets select its pods: the Eviction API refuses to evict them, so every drain of their nodes fails"}},
		{name: "a budget of another app does not count", pods: replicas("web", 0, 1, 2), pdbs: []*policyv1.PodDisruptionBudget{pdb("db", "db", &one, nil)},
			want: []string{`an upgrade batch (3 nodes of pool "user", drained at once) can take 3 of 3 replicas; no PodDisruptionBudget, floor 2`}},
		{name: "twelve replicas one per node: a batch takes 3, the floor allows 4", pods: replicas("api", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)},
		{name: "twelve replicas, five on surge nodes", pods: replicas("api", 28, 28, 28, 29, 29, 0, 1, 2, 3, 4, 5, 6),
			want: []string{"5 of 12 replicas on surge nodes, drained together when the upgrade under way ends; no PodDisruptionBudget, floor 8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range MaintenanceRisks(pool.Identity{}, nodes, tt.pods, tt.pdbs, DefaultMaxSurge) {
				got = append(got, f.Detail)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("risks (-want +got):\n%s", diff)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
