package integration

import (
	"bytes"
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
)

// nodeIdentity is what a reimage in place keeps of a Node and what it changes.
type nodeIdentity struct {
	UID           types.UID
	Created       time.Time
	Image         string
	Kubelet       string
	Unschedulable bool
	NotReadyTaint bool
	Ready         bool
}

func identities(ctx context.Context, cs kubernetes.Interface) (map[string]nodeIdentity, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]nodeIdentity{}
	for _, n := range list.Items {
		id := nodeIdentity{UID: n.UID, Created: n.CreationTimestamp.Time, Image: n.Labels[simulate.NodeImageVersionLabel],
			Kubelet: n.Status.NodeInfo.KubeletVersion, Unschedulable: n.Spec.Unschedulable}
		for _, t := range n.Spec.Taints {
			id.NotReadyTaint = id.NotReadyTaint || t.Key == v1.TaintNodeNotReady
		}
		for _, c := range n.Status.Conditions {
			id.Ready = id.Ready || (c.Type == v1.NodeReady && c.Status == v1.ConditionTrue)
		}
		out[n.Name] = id
	}
	return out, nil
}

// TestSimulateMaintenance runs the short surge upgrade under both profiles, as `make test` does,
// and checks the mechanism from the API: every original node reimaged in place (same Node
// object: name, UID, creationTimestamp) onto the new image and kubelet, the surge nodes gone,
// every replica evicted at least once through the Eviction API (every original node was
// drained), refusals only where a PodDisruptionBudget binds, and each workload's Ready replicas
// recorded. It prints the goals; pool-scheduler vs default is not asserted here.
func TestSimulateMaintenance(t *testing.T) {
	modes, err := simulate.Modes()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := simulate.Load("surge-upgrade-small")
	if err != nil {
		t.Fatal(err)
	}
	m := sc.Maintenance
	c := &simulate.Comparison{Scenario: sc.Name, Description: sc.Description}
	for _, mode := range modes {
		var before, after map[string]nodeIdentity
		observe := func(ctx context.Context, stage simulate.Stage, cs kubernetes.Interface) error {
			var err error
			switch stage {
			case simulate.StageMaintenanceStart:
				before, err = identities(ctx, cs)
			case simulate.StageEnd:
				after, err = identities(ctx, cs)
			}
			return err
		}
		res, err := simulate.Run(context.Background(), sc, mode, simulate.Options{Observe: observe})
		if err != nil {
			t.Fatalf("%s under %s: %v", sc.Name, mode.Name, err)
		}
		c.Results = append(c.Results, res)
		mr := res.Maintenance
		if mr == nil {
			t.Fatalf("%s: no maintenance result", mode.Name)
		}
		if mr.Outcome != simulate.OutcomeSucceeded {
			t.Errorf("%s: upgrade %s (quarantined %v)", mode.Name, mr.Outcome, mr.QuarantinedNodes)
		}
		// In place: the same objects, now on the new image and kubelet, Ready and schedulable.
		want := map[string]nodeIdentity{}
		var original []string
		for name, id := range before {
			if id.Image != m.FromNodeImage || id.Kubelet != m.FromKubelet || !id.Ready {
				t.Errorf("%s: node %s before the upgrade: %+v", mode.Name, name, id)
			}
			id.Image, id.Kubelet = m.ToNodeImage, m.ToKubelet
			want[name] = id
			original = append(original, name)
		}
		if diff := cmp.Diff(want, after); diff != "" {
			t.Errorf("%s: nodes after the upgrade (-original, reimaged in place +got):\n%s", mode.Name, diff)
		}
		sort.Strings(original)
		reimaged := append([]string(nil), mr.ReimagedNodes...)
		sort.Strings(reimaged)
		if diff := cmp.Diff(original, reimaged); diff != "" {
			t.Errorf("%s: reimaged nodes (-original +reimaged):\n%s", mode.Name, diff)
		}
		if want := (m.MaxSurge.Of(len(original))); len(mr.SurgeNodes) != want {
			t.Errorf("%s: %d surge nodes, want %d (maxSurge %s of %d)", mode.Name, len(mr.SurgeNodes), want, m.MaxSurge, len(original))
		}
		for _, name := range mr.SurgeNodes {
			if _, ok := before[name]; ok {
				t.Errorf("%s: surge node %s reuses an original node's name", mode.Name, name)
			}
		}
		// Every replica started on an original node, and every original node was drained.
		if mr.Evictions < mr.Replicas {
			t.Errorf("%s: %d evictions for %d replicas: every replica sat on a drained node", mode.Name, mr.Evictions, mr.Replicas)
		}
		pdbRefusals := 0
		for _, w := range mr.Workloads {
			if !w.PDB && w.Refusals > 0 {
				t.Errorf("%s: %s has no PodDisruptionBudget but %d refused evictions", mode.Name, w.Name, w.Refusals)
			}
			pdbRefusals += w.Refusals
			if len(w.Timeline) < 2 || w.Timeline[0] != (simulate.ReadyPoint{Minute: 0, Ready: w.Replicas}) {
				t.Errorf("%s: %s timeline %v does not start with all %d Ready", mode.Name, w.Name, w.Timeline, w.Replicas)
			}
			if w.Evictions > 0 && w.MinReady >= w.Replicas {
				t.Errorf("%s: %s: %d evictions but min Ready %d of %d: the drop was not recorded", mode.Name, w.Name, w.Evictions, w.MinReady, w.Replicas)
			}
		}
		if pdbRefusals == 0 {
			t.Errorf("%s: no eviction refused: the 24-replica set's budget (maxUnavailable 1) must refuse the second of its pods in a batch", mode.Name)
		}
		t.Logf("%s: %d evictions (%.2f/replica), %d refused, %.0f simulated minutes, %d workloads below floor",
			mode.Name, mr.Evictions, mr.EvictionsPerReplica, mr.Refusals, mr.Minutes, mr.BelowFloor)
	}
	var table bytes.Buffer
	if err := simulate.WriteTable(&table, []*simulate.Comparison{c}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	for _, g := range simulate.MaintenanceGoals(c.Results[0], c.Results[1]) {
		t.Logf("goal %-50s met=%-5v default %s, pool-scheduler %s", g.Name, g.Met, g.Default, g.PoolScheduler)
	}
}
