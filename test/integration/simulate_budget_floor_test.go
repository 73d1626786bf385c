package integration

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
)

// budgetFloorScenario: a 6-node pool upgraded 3 nodes at a time, so a batch can take half of a
// workload spread one replica per node; no workload has a budget of its own.
const budgetFloorScenario = `
name: budget-floor-small
description: A surge upgrade of 3 nodes at a time with the budget floor on.
azure:
  clusterHash: "27255451"
pools:
- name: user
  vmType: scaleSet
  nodes: 6
  zones: 3
  updateDomains: 2
workloads:
- name: worker
  replicas: 6
- name: batch
  replicas: 3
- name: pair
  replicas: 2
maintenance:
  kind: surgeUpgrade
  pool: user
  maxSurge: 3
  drainTimeout: 60m
  budgetFloor: true
  seed: 43
  timeScale: 120
`

// TestSimulateBudgetFloor: the maintenance simulator with maintenance.budgetFloor runs the real
// floor controller: before the upgrade starts the workloads of 3+ replicas (not the pair) have the
// floor's budget, and through the upgrade no workload goes below ceil(2r/3) Ready and the
// upgrade succeeds (no drain held past its timeout by the budgets).
func TestSimulateBudgetFloor(t *testing.T) {
	sc, err := simulate.Parse("budget-floor-small", []byte(budgetFloorScenario))
	if err != nil {
		t.Fatal(err)
	}
	modes, err := simulate.Modes()
	if err != nil {
		t.Fatal(err)
	}
	var budgets []string
	observe := func(ctx context.Context, stage simulate.Stage, cs kubernetes.Interface) error {
		if stage != simulate.StageMaintenanceStart {
			return nil
		}
		l, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: floor.ManagedByLabel + "=" + floor.ManagedBy})
		for _, p := range l.Items {
			budgets = append(budgets, p.Name+" minAvailable="+p.Spec.MinAvailable.String())
		}
		sort.Strings(budgets)
		return err
	}
	mode := modes[len(modes)-1] // pool-scheduler's profile
	res, err := simulate.Run(context.Background(), sc, mode, simulate.Options{Observe: observe})
	if err != nil {
		t.Fatalf("under %s: %v", mode.Name, err)
	}
	want := []string{"batch-00-r1-budget-floor minAvailable=2", "worker-00-r1-budget-floor minAvailable=4"}
	if diff := cmp.Diff(want, budgets); diff != "" {
		t.Errorf("the floor's budgets when the upgrade starts (-want +got):\n%s", diff)
	}
	mr := res.Maintenance
	if mr.Outcome != aksemu.OutcomeSucceeded || mr.BelowFloor != 0 {
		t.Errorf("with the budget floor: upgrade %s, %d workloads below ceil(2r/3) Ready; want Succeeded, 0", mr.Outcome, mr.BelowFloor)
	}
	for _, w := range mr.Workloads {
		t.Logf("%s: %d replicas, at least %d Ready (floor %d), %d evictions, %d refused", w.Name, w.Replicas, w.MinReady, w.Floor, w.Evictions, w.Refusals)
	}
}
