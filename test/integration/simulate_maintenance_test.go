package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/test/util"
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
		id := nodeIdentity{UID: n.UID, Created: n.CreationTimestamp.Time, Image: n.Labels[maintenance.NodeImageVersionLabel],
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

// TestSimulateMaintenance runs the short maintenance scenarios under both profiles, as `make
// test` does, and checks each mechanism from the API: a surge upgrade reimages every original
// node under its name (a new Node object, as AKS probably registers it again; the same one with
// reimage: keepsNode) onto the new image and kubelet
// and removes its surge nodes; a blue-green upgrade and a Karpenter replacement leave only new
// nodes on the new image. In each, every replica is evicted at least once through the Eviction
// API (every original node was drained), evictions are refused only where a
// PodDisruptionBudget binds and at least once there, and each workload's Ready replicas are
// recorded. It prints the table with the goals, and fails when pool-scheduler is behind
// the default by more than the run-to-run spread measured for the seed (checkNotBehind).
func TestSimulateMaintenance(t *testing.T) {
	modes, err := simulate.Modes()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"surge-upgrade-small", "blue-green-small", "consolidation-small"}
	comparisons := make([]*simulate.Comparison, len(names))
	t.Run("runs", func(t *testing.T) {
		for i, name := range names {
			t.Run(name, func(t *testing.T) {
				sc, err := simulate.Load(name)
				if err != nil {
					t.Fatal(err)
				}
				c := &simulate.Comparison{Scenario: sc.Name, Description: sc.Description}
				for _, mode := range modes {
					c.Results = append(c.Results, runMaintenance(t, sc, mode))
				}
				var table bytes.Buffer
				if err := simulate.WriteTable(&table, []*simulate.Comparison{c}); err != nil {
					t.Fatal(err)
				}
				t.Logf("\n%s", table.String())
				checkNotBehind(t, c)
				comparisons[i] = c
			})
		}
	})
	if t.Failed() {
		return
	}
	if slices.Contains(comparisons, nil) {
		// -run chose some of the scenarios: the report needs all three.
		t.Logf("report not rendered: only some scenarios ran")
		return
	}
	// The report draws each workload's Ready replicas over the maintenance, a line per mode.
	out := filepath.Join(util.RepoRoot(), "_output", "simulate")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, "maintenance.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := simulate.WriteHTML(f, comparisons); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom := renderInChromium(t, page, filepath.Join(out, "maintenance.png"), names...)
	for _, c := range comparisons {
		for _, w := range c.Results[0].Maintenance.Workloads {
			for _, mode := range modes {
				if !strings.Contains(dom, fmt.Sprintf(`data-timeline="%s"`, w.Name)) || !strings.Contains(dom, fmt.Sprintf(`data-mode="%s" points="`, mode.Name)) {
					t.Errorf("%s: rendered page has no timeline of %s under %s", c.Scenario, w.Name, mode.Name)
				}
			}
		}
	}
}

// notBehindBy is, per short scenario, how far pool-scheduler's evictions and refused evictions
// per replica may exceed the default scheduler's in one run of make test's seed (43) before
// checkNotBehind fails (docs/maintenance.md, "The make-test guard"). Evictions: one eviction
// (0.03 per replica on the 42 and 37 replicas of surge-upgrade-small and consolidation-small,
// none on blue-green-small, where every replica moves once): in 24 reruns of that seed under a
// make test's load, on both release lines, pool-scheduler was 0.05-0.16 below the default, and
// before the end-share bit it was 0.00-0.19 above, which this catches. Refusals count time waited
// as much as placement, so their bounds (the largest gap seen plus the gaps' range) only catch a
// gross regression.
var notBehindBy = map[string]struct{ evictions, refusals float64 }{
	"surge-upgrade-small": {evictions: 0.03, refusals: 3.7},
	"blue-green-small":    {evictions: 0.02, refusals: 3.7},
	"consolidation-small": {evictions: 0.03, refusals: 4.5},
}

// checkNotBehind fails when pool-scheduler is behind the default scheduler in c by more than
// notBehindBy: a change that makes placement move replicas more during maintenance.
func checkNotBehind(t *testing.T, c *simulate.Comparison) {
	t.Helper()
	by, ok := notBehindBy[c.Scenario]
	if !ok || len(c.Results) != 2 {
		t.Fatalf("%s: no guard, or %d modes", c.Scenario, len(c.Results))
	}
	def, pool := c.Results[0].Maintenance, c.Results[1].Maintenance
	if d := pool.EvictionsPerReplica - def.EvictionsPerReplica; d > by.evictions {
		t.Errorf("%s: pool-scheduler %.2f evictions per replica, the default %.2f: behind by %.2f, more than the measured spread %.2f",
			c.Scenario, pool.EvictionsPerReplica, def.EvictionsPerReplica, d, by.evictions)
	}
	if d := pool.RefusalsPerReplica - def.RefusalsPerReplica; d > by.refusals {
		t.Errorf("%s: pool-scheduler %.2f refused evictions per replica, the default %.2f: behind by %.2f, more than the measured spread %.2f",
			c.Scenario, pool.RefusalsPerReplica, def.RefusalsPerReplica, d, by.refusals)
	}
}

func runMaintenance(t *testing.T, sc *simulate.Scenario, mode simulate.Mode) *simulate.Result {
	m := sc.Maintenance
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
	mr := res.Maintenance
	if mr == nil {
		t.Fatalf("%s: no maintenance result", mode.Name)
	}
	if mr.Outcome != aksemu.OutcomeSucceeded {
		t.Errorf("%s: %s %s (quarantined %v)", mode.Name, m.Kind, mr.Outcome, mr.QuarantinedNodes)
	}
	var original []string
	for name, id := range before {
		if id.Image != m.FromNodeImage || id.Kubelet != m.FromKubelet || !id.Ready {
			t.Errorf("%s: node %s before the maintenance: %+v", mode.Name, name, id)
		}
		original = append(original, name)
	}
	sort.Strings(original)
	sorted := func(names []string) []string {
		out := append([]string(nil), names...)
		sort.Strings(out)
		return out
	}
	switch m.Kind {
	case simulate.SurgeUpgrade:
		// The same names, now on the new image and kubelet, Ready and schedulable: the same
		// objects (keepsNode) or new ones registered under the same names (registersAgain).
		want := map[string]nodeIdentity{}
		for name, id := range before {
			id.Image, id.Kubelet = m.ToNodeImage, m.ToKubelet
			if m.Reimage == simulate.ReimageRegistersAgain {
				if a, ok := after[name]; ok && a.UID == id.UID {
					t.Errorf("%s: node %s kept its UID through a reimage that registers it again", mode.Name, name)
				}
				id.UID, id.Created = after[name].UID, after[name].Created
			}
			want[name] = id
		}
		if diff := cmp.Diff(want, after); diff != "" {
			t.Errorf("%s: nodes after the upgrade (-original, reimaged (%s) +got):\n%s", mode.Name, m.Reimage, diff)
		}
		if diff := cmp.Diff(original, sorted(mr.ReimagedNodes)); diff != "" {
			t.Errorf("%s: reimaged nodes (-original +reimaged):\n%s", mode.Name, diff)
		}
		if want := m.MaxSurge.Of(len(original)); len(mr.NewNodes) != want {
			t.Errorf("%s: %d surge nodes, want %d (maxSurge %s of %d)", mode.Name, len(mr.NewNodes), want, m.MaxSurge, len(original))
		}
		if diff := cmp.Diff(sorted(mr.NewNodes), sorted(mr.RemovedNodes)); diff != "" {
			t.Errorf("%s: removed nodes (-surge nodes +removed):\n%s", mode.Name, diff)
		}
	default:
		// Replaced: every original node deleted, as many new ones on the new image.
		if diff := cmp.Diff(original, sorted(mr.RemovedNodes)); diff != "" {
			t.Errorf("%s: removed nodes (-original +removed):\n%s", mode.Name, diff)
		}
		var got []string
		for name, id := range after {
			got = append(got, name)
			if id.Image != m.ToNodeImage || id.Kubelet != m.ToKubelet || !id.Ready || id.Unschedulable {
				t.Errorf("%s: node %s after the maintenance: %+v", mode.Name, name, id)
			}
		}
		if diff := cmp.Diff(sorted(mr.NewNodes), sorted(got)); diff != "" {
			t.Errorf("%s: nodes after the maintenance (-new nodes +got):\n%s", mode.Name, diff)
		}
		if len(mr.NewNodes) != len(original) {
			t.Errorf("%s: %d new nodes for %d original ones", mode.Name, len(mr.NewNodes), len(original))
		}
	}
	for _, name := range mr.NewNodes {
		if _, ok := before[name]; ok {
			t.Errorf("%s: new node %s reuses an original node's name", mode.Name, name)
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
		if len(w.Timeline) < 2 || w.Timeline[0] != (aksemu.ReadyPoint{Minute: 0, Ready: w.Replicas}) {
			t.Errorf("%s: %s timeline %v does not start with all %d Ready", mode.Name, w.Name, w.Timeline, w.Replicas)
		}
		if w.Evictions > 0 && w.MinReady >= w.Replicas {
			t.Errorf("%s: %s: %d evictions but min Ready %d of %d: the drop was not recorded", mode.Name, w.Name, w.Evictions, w.MinReady, w.Replicas)
		}
	}
	if pdbRefusals == 0 {
		t.Errorf("%s: no eviction refused: the web set's budget (maxUnavailable 1) must refuse the second of its pods drained at once", mode.Name)
	}
	t.Logf("%s: %d evictions (%.2f/replica), %d refused, %.0f simulated minutes, %d workloads below floor",
		mode.Name, mr.Evictions, mr.EvictionsPerReplica, mr.Refusals, mr.Minutes, mr.BelowFloor)
	return res
}
