package domainspread

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
)

// scores runs PreScore, Score and NormalizeScore over nodes.
func scores(t *testing.T, ctx context.Context, pl *DomainSpread, pod *v1.Pod, nodes []*v1.Node) (map[string]int64, *fwk.Status) {
	t.Helper()
	state := framework.NewCycleState()
	infos := nodeInfosOf(t, pl, nodes)
	if st := pl.PreScore(ctx, state, pod, infos); st.IsSkip() {
		// The framework then leaves the plugin out: it adds nothing to any node.
		out := map[string]int64{}
		for _, n := range nodes {
			out[n.Name] = 0
		}
		return out, nil
	} else if !st.IsSuccess() {
		return nil, st
	}
	var list framework.NodeScoreList
	for _, ni := range infos {
		n := ni.Node()
		s, status := pl.Score(ctx, state, pod, ni)
		if !status.IsSuccess() {
			t.Fatal(status)
		}
		list = append(list, framework.NodeScore{Name: n.Name, Score: s})
	}
	if status := pl.NormalizeScore(ctx, state, pod, list); !status.IsSuccess() {
		t.Fatal(status)
	}
	out := map[string]int64{}
	for _, s := range list {
		out[s.Name] = s.Score
	}
	return out, nil
}

// preScored runs PreScore for pod over infos and returns the cycle state and its scoring state.
func preScored(t *testing.T, ctx context.Context, pl *DomainSpread, pod *v1.Pod, infos []fwk.NodeInfo) (fwk.CycleState, *scoreState) {
	t.Helper()
	state := framework.NewCycleState()
	if s := pl.PreScore(ctx, state, pod, infos); !s.IsSuccess() {
		t.Fatal(s)
	}
	c, err := state.Read(preScoreStateKey)
	if err != nil {
		t.Fatal(err)
	}
	return state, c.(*scoreState)
}

// nodeInfosOf returns the snapshot's NodeInfos of nodes, in their order.
func nodeInfosOf(t *testing.T, pl *DomainSpread, nodes []*v1.Node) []fwk.NodeInfo {
	t.Helper()
	infos := make([]fwk.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		ni, err := pl.sharedLister.NodeInfos().Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, ni)
	}
	return infos
}

// best returns the names of the nodes with the top score.
func best(scores map[string]int64) []string {
	var top int64 = -1
	var names []string
	for n, s := range scores {
		switch {
		case s > top:
			top, names = s, []string{n}
		case s == top:
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func TestScoreGroupsByOwner(t *testing.T) {
	nodes := grid(2, 3)
	tests := []struct {
		name     string
		existing []*v1.Pod
		pod      *v1.Pod
		wantBest []string
		// oneOf: the cell diagonal (numbered by domain IDs, assigned in the order nodes are
		// first seen) picks exactly one of wantBest.
		oneOf bool
	}{
		{
			name:     "first replica: every node ties",
			pod:      rsPod("new", "rs-a", ""),
			wantBest: []string{"fd0-ud0", "fd0-ud1", "fd0-ud2", "fd1-ud0", "fd1-ud1", "fd1-ud2"},
		},
		{
			name:     "second replica goes to the other fault domain and another update domain",
			existing: []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")},
			pod:      rsPod("new", "rs-a", ""),
			wantBest: []string{"fd1-ud1", "fd1-ud2"},
			oneOf:    true,
		},
		{
			name:     "other workloads' pods do not count",
			existing: []*v1.Pod{rsPod("b1", "rs-b", "fd0-ud0"), rsPod("b2", "rs-b", "fd0-ud1")},
			pod:      rsPod("new", "rs-a", ""),
			wantBest: []string{"fd0-ud0", "fd0-ud1", "fd0-ud2", "fd1-ud0", "fd1-ud1", "fd1-ud2"},
		},
		{
			name: "old revision's replicas (another ReplicaSet) do not skew the new one",
			existing: []*v1.Pod{
				rsPod("old1", "rs-old", "fd0-ud0"), rsPod("old2", "rs-old", "fd0-ud1"), rsPod("old3", "rs-old", "fd0-ud2"),
				rsPod("new1", "rs-new", "fd1-ud0"),
			},
			pod:      rsPod("new", "rs-new", ""),
			wantBest: []string{"fd0-ud1", "fd0-ud2"},
			oneOf:    true,
		},
		{
			name: "terminating replicas do not count",
			existing: []*v1.Pod{
				func() *v1.Pod {
					p := rsPod("gone", "rs-a", "fd1-ud1")
					p.DeletionTimestamp = &metav1.Time{}
					return p
				}(),
				rsPod("a1", "rs-a", "fd0-ud0"),
			},
			pod:      rsPod("new", "rs-a", ""),
			wantBest: []string{"fd1-ud1", "fd1-ud2"},
			oneOf:    true,
		},
		{
			name: "same controller UID in another namespace does not count",
			existing: []*v1.Pod{func() *v1.Pod {
				p := rsPod("a1", "rs-a", "fd0-ud0")
				p.Namespace = "other"
				return p
			}()},
			pod:      rsPod("new", "rs-a", ""),
			wantBest: []string{"fd0-ud0", "fd0-ud1", "fd0-ud2", "fd1-ud0", "fd1-ud1", "fd1-ud2"},
		},
		{
			name: "fault domain dominates, update domain breaks ties",
			existing: []*v1.Pod{
				rsPod("a1", "rs-a", "fd0-ud0"), rsPod("a2", "rs-a", "fd1-ud1"), rsPod("a3", "rs-a", "fd0-ud2"),
			},
			pod: rsPod("new", "rs-a", ""),
			// fd1 has fewer replicas; in fd1, ud0 and ud2 hold one each: tie on ud, and on the
			// cell (both empty); the fuller cell diagonal picks one.
			wantBest: []string{"fd1-ud0", "fd1-ud2"},
			oneOf:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, ctx, defaultArgs(), tt.existing, nodes)
			got, status := scores(t, ctx, pl, tt.pod, nodes)
			if status != nil {
				t.Fatal(status)
			}
			if tt.oneOf {
				if b := best(got); len(b) != 1 || !slices.Contains(tt.wantBest, b[0]) {
					t.Errorf("best nodes %v, want one of %v\nscores: %v", b, tt.wantBest, got)
				}
				return
			}
			if diff := cmp.Diff(tt.wantBest, best(got)); diff != "" {
				t.Errorf("best nodes (-want +got):\n%s\nscores: %v", diff, got)
			}
		})
	}
}

func TestPreScoreSkips(t *testing.T) {
	tsc := rsPod("p", "rs-a", "")
	tsc.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.ScheduleAnyway}}
	ds := st.MakePod().Namespace("default").Name("ds").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()
	placed := []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")}
	tests := []struct {
		name     string
		args     func(*config.DomainSpreadArgs)
		existing []*v1.Pod
		pod      *v1.Pod
		wantSkip bool
	}{
		{name: "no controller", existing: placed, pod: st.MakePod().Namespace("default").Name("bare").Obj(), wantSkip: true},
		{name: "own spread constraints", existing: placed, pod: tsc, wantSkip: true},
		{name: "own spread constraints, configured to spread anyway", args: func(a *config.DomainSpreadArgs) { a.SpreadPodsWithConstraints = true }, existing: placed, pod: tsc},
		{name: "DaemonSet pod", existing: placed, pod: ds, wantSkip: true},
		{name: "ReplicaSet pod", existing: placed, pod: rsPod("p", "rs-a", "")},
		// Every node would score the same.
		{name: "first replica of its workload", existing: []*v1.Pod{rsPod("b1", "rs-b", "fd0-ud0")}, pod: rsPod("p", "rs-a", ""), wantSkip: true},
		{name: "first replica, Hard mode", args: func(a *config.DomainSpreadArgs) { a.Mode = config.SpreadHard }, pod: rsPod("p", "rs-a", ""), wantSkip: true},
		{name: "replica placed, Hard mode", args: func(a *config.DomainSpreadArgs) { a.Mode = config.SpreadHard }, existing: placed, pod: rsPod("p", "rs-a", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			args := defaultArgs()
			if tt.args != nil {
				tt.args(args)
			}
			pl := newTestPlugin(t, ctx, args, tt.existing, grid(1, 1))
			state := framework.NewCycleState()
			if args.Mode == config.SpreadHard {
				if _, status := pl.PreFilter(ctx, state, tt.pod, nil); !status.IsSuccess() && !status.IsSkip() {
					t.Fatal(status)
				}
			}
			status := pl.PreScore(ctx, state, tt.pod, nil)
			if status.IsSkip() != tt.wantSkip {
				t.Errorf("PreScore = %v, want skip %v", status, tt.wantSkip)
			}
		})
	}
}

func TestScoreMissingKeysAndJointDimensions(t *testing.T) {
	// Two zones whose update domains are both numbered 0 and 1: without joint, "ud 0" of zone a
	// and "ud 0" of zone b are one domain.
	nodes := []*v1.Node{
		st.MakeNode().Name("a0").Label(zoneKey, "a").Label(udKey, "0").Label(v1.LabelHostname, "a0").Obj(),
		st.MakeNode().Name("a1").Label(zoneKey, "a").Label(udKey, "1").Label(v1.LabelHostname, "a1").Obj(),
		st.MakeNode().Name("b0").Label(zoneKey, "b").Label(udKey, "0").Label(v1.LabelHostname, "b0").Obj(),
		st.MakeNode().Name("b1").Label(zoneKey, "b").Label(udKey, "1").Label(v1.LabelHostname, "b1").Obj(),
	}
	existing := []*v1.Pod{rsPod("r1", "rs-a", "a0"), rsPod("r2", "rs-a", "b1"), rsPod("r3", "rs-a", "a1")}
	dims := func(joint bool) func(*config.DomainSpreadArgs) {
		return func(a *config.DomainSpreadArgs) {
			a.Dimensions = []config.SpreadDimension{
				{Name: "zone", LabelKeys: []string{zoneKey}},
				{Name: "update-domain", LabelKeys: []string{udKey}, Joint: joint},
			}
		}
	}
	tests := []struct {
		name     string
		args     func(*config.DomainSpreadArgs)
		nodes    []*v1.Node
		wantBest []string
	}{
		// Zone b has 1, zone a 2. Separate ud: ud0 has 1 (a0), ud1 has 2 (b1, a1) -> b0.
		{name: "separate dimensions", args: dims(false), nodes: nodes, wantBest: []string{"b0"}},
		// Joint: (b,0) holds 0, (b,1) holds 1 -> b0 as well; and a tie-free check below.
		{name: "joint dimension", args: dims(true), nodes: nodes, wantBest: []string{"b0"}},
		{
			name: "node without the update-domain label: dimension ignored",
			args: dims(false),
			nodes: append(nodes[:4:4],
				st.MakeNode().Name("b-unlabelled").Label(zoneKey, "b").Label(v1.LabelHostname, "b-unlabelled").Obj()),
			wantBest: []string{"b-unlabelled", "b0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			args := defaultArgs()
			tt.args(args)
			pl := newTestPlugin(t, ctx, args, existing, tt.nodes)
			got, _ := scores(t, ctx, pl, rsPod("new", "rs-a", ""), tt.nodes)
			if diff := cmp.Diff(tt.wantBest, best(got)); diff != "" {
				t.Errorf("best nodes (-want +got):\n%s\nscores: %v", diff, got)
			}
		})
	}
}

func TestJointDomainKeys(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	args := defaultArgs()
	args.Dimensions = []config.SpreadDimension{
		{Name: "zone", LabelKeys: []string{zoneKey}},
		{Name: "fault-domain", LabelKeys: []string{fdKey}, Joint: true},
	}
	pl := newTestPlugin(t, ctx, args, nil, nil)
	a, _ := pl.domainKeyOf(1, map[string]string{zoneKey: "a", fdKey: "0"})
	b, _ := pl.domainKeyOf(1, map[string]string{zoneKey: "b", fdKey: "0"})
	if a == b {
		t.Errorf("joint domains of zones a and b are equal: %v", a)
	}
	if _, ok := pl.domainKeyOf(1, map[string]string{fdKey: "0"}); ok {
		t.Error("joint domain without the previous dimension's key was accepted")
	}
}

func TestNormalizeScore(t *testing.T) {
	tests := []struct {
		name string
		raw  []int64
		want []int64
	}{
		{name: "all equal", raw: []int64{5, 5, 5}, want: []int64{100, 100, 100}},
		{name: "two levels", raw: []int64{0, 7}, want: []int64{100, 0}},
		{name: "ranks, not magnitudes", raw: []int64{1 << 30, 0, 1, 1 << 30, 2}, want: []int64{0, 100, 33, 0, 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list framework.NodeScoreList
			for i, r := range tt.raw {
				list = append(list, framework.NodeScore{Name: fmt.Sprint(i), Score: r})
			}
			(&DomainSpread{}).NormalizeScore(context.Background(), nil, nil, list)
			var got []int64
			for _, s := range list {
				got = append(got, s.Score)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// scoreAll runs a scoring cycle for pod and returns the raw score per node name.
func scoreAll(t *testing.T, ctx context.Context, pl *DomainSpread, pod *v1.Pod) map[string]int64 {
	t.Helper()
	infos, err := pl.sharedLister.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	return rawScores(t, ctx, pl, pod, infos)
}

// rawScores runs a scoring cycle for pod over infos and returns the raw score per node name.
func rawScores(t *testing.T, ctx context.Context, pl *DomainSpread, pod *v1.Pod, infos []fwk.NodeInfo) map[string]int64 {
	t.Helper()
	state := framework.NewCycleState()
	if s := pl.PreScore(ctx, state, pod, infos); !s.IsSuccess() {
		t.Fatal(s)
	}
	out := map[string]int64{}
	for _, ni := range infos {
		raw, s := pl.Score(ctx, state, pod, ni)
		if !s.IsSuccess() {
			t.Fatal(s)
		}
		out[ni.Node().Name] = raw
	}
	return out
}

// TestNodeUpdatesAndDomainChurn: domains are remembered per node object, so a node that moves
// to another domain (a new object, as the scheduler's cache delivers it) is counted in its new
// domain; and when far more domains were seen than nodes exist (hosts that came and went), the
// domain table starts over without changing any score.
func TestNodeUpdatesAndDomainChurn(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	nodes := []*v1.Node{node("a", "0", "0"), node("b", "0", "1"), node("c", "1", "0")}
	pods := []*v1.Pod{replica("r1", "rs", "a")}
	args := defaultArgs()
	args.Dimensions = args.Dimensions[:2] // fault and update domain
	pl := newTestPlugin(t, ctx, args, pods, nodes)
	pod := replica("new", "rs", "")

	before := scoreAll(t, ctx, pl, pod)
	// a holds the replica: its FD and UD are loaded; c shares neither, b shares the FD.
	if !(before["c"] < before["b"] && before["b"] < before["a"]) {
		t.Fatalf("scores before the update: %v, want c < b < a", before)
	}

	// Node a moves to fault domain 1 and update domain 1: c now shares its FD, b its UD.
	moved := nodes[0].DeepCopy()
	moved.Labels[zoneKey], moved.Labels[udKey] = "1", "1"
	pl.sharedLister = cache.NewSnapshot(pods, []*v1.Node{moved, nodes[1], nodes[2]})
	after := scoreAll(t, ctx, pl, pod)
	if !(after["b"] < after["c"]) {
		t.Errorf("scores after node a moved to FD 1: %v, want b (FD 0) < c (FD 1)", after)
	}

	// Resolve hundreds of short-lived hosts: the next cycle starts a new epoch of domain IDs.
	epoch := pl.domains.epoch
	for i := range 500 {
		pl.domainIDs(node(fmt.Sprintf("gone-%d", i), "0", fmt.Sprint(i)), epoch)
	}
	again := scoreAll(t, ctx, pl, pod)
	if pl.domains.epoch == epoch {
		t.Errorf("domain table not reset after %d update domains for 3 nodes", pl.domains.len(1))
	}
	if diff := cmp.Diff(after, again); diff != "" {
		t.Errorf("scores changed by the reset (-before +after):\n%s", diff)
	}
}

// TestDefaultDimensionsOnUpstreamFaultDomainLabels: nodes labelled as cloud-provider-azure
// PR #10907 would label them (topology.kubernetes.azure.com/fault-domain on every VM, no zone
// label outside zones) spread over fault domains outside zones, and over zones (not the fault
// domain, which repeats in every zone) on zonal VMs, with the default dimensions.
func TestDefaultDimensionsOnUpstreamFaultDomainLabels(t *testing.T) {
	const azureFD = "topology.kubernetes.azure.com/fault-domain"
	mk := func(name string, labels ...string) *v1.Node {
		n := st.MakeNode().Name(name).Label(v1.LabelHostname, name)
		for i := 0; i+1 < len(labels); i += 2 {
			n.Label(labels[i], labels[i+1])
		}
		return n.Obj()
	}
	tests := []struct {
		name     string
		nodes    []*v1.Node
		existing []*v1.Pod
		wantBest []string
	}{{
		name:     "outside zones: the upstream fault domain is the zone dimension",
		nodes:    []*v1.Node{mk("fd0-a", azureFD, "0"), mk("fd0-b", azureFD, "0"), mk("fd1-a", azureFD, "1"), mk("fd1-b", azureFD, "1")},
		existing: []*v1.Pod{rsPod("r1", "rs-a", "fd0-a")},
		wantBest: []string{"fd1-a", "fd1-b"},
	}, {
		name: "zonal: the zone label wins over the fault domain (0 in every zone)",
		nodes: []*v1.Node{
			mk("z1-a", zoneKey, "westeurope-1", azureFD, "0"), mk("z1-b", zoneKey, "westeurope-1", azureFD, "0"),
			mk("z2-a", zoneKey, "westeurope-2", azureFD, "0"), mk("z2-b", zoneKey, "westeurope-2", azureFD, "0"),
		},
		existing: []*v1.Pod{rsPod("r1", "rs-a", "z1-a")},
		wantBest: []string{"z2-a", "z2-b"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, ctx, defaultArgs(), tt.existing, tt.nodes)
			got, status := scores(t, ctx, pl, rsPod("new", "rs-a", ""), tt.nodes)
			if status != nil {
				t.Fatal(status)
			}
			if diff := cmp.Diff(tt.wantBest, best(got)); diff != "" {
				t.Errorf("best nodes (-want +got):\n%s\nscores: %v", diff, got)
			}
		})
	}
}

// TestScoreDuringAnUpgrade: while the pool upgrades, a replica goes to the least loaded zone as
// always, and there to a node the upgrade leaves in place (reimaged already) rather than to an
// old node the upgrade drains next or a surge node it removes at its end; outside upgrades,
// generations do not matter, but a node cluster-autoscaler marked for removal still scores last.
func TestScoreDuringAnUpgrade(t *testing.T) {
	const oldImage, newImage = "AKSUbuntu-2204gen2containerd-202409.30.0", "AKSUbuntu-2204gen2containerd-202410.27.0"
	created := metav1.Now()
	aks := func(name, zone, image string, surge bool) *v1.Node {
		n := node(name, zone, "0")
		n.Labels["kubernetes.azure.com/agentpool"] = "user"
		n.Labels[maintenance.NodeImageVersionLabel] = image
		n.Status.NodeInfo.KubeletVersion = "v1.34.2"
		n.CreationTimestamp = metav1.NewTime(created.Add(-48 * time.Hour))
		if surge {
			n.CreationTimestamp = created
		}
		return n
	}
	candidate := aks("z0-candidate", "0", oldImage, false)
	candidate.Spec.Taints = []v1.Taint{{Key: maintenance.TaintDeletionCandidate, Effect: v1.TaintEffectPreferNoSchedule}}
	// KEP-5683: a node being drained says so with a condition, without a taint.
	draining := aks("z0-draining", "0", oldImage, false)
	draining.Status.Conditions = append(draining.Status.Conditions, v1.NodeCondition{Type: "DrainInProgress", Status: v1.ConditionTrue})
	tests := []struct {
		name     string
		nodes    []*v1.Node
		existing []*v1.Pod
		wantBest []string
	}{
		{
			name: "upgrading: the reimaged node of the emptier zone",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false), aks("z0-reimaged", "0", newImage, false), aks("z0-surge", "0", newImage, true),
				aks("z1-old", "1", oldImage, false), aks("z1-reimaged", "1", newImage, false),
			},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-reimaged")},
			wantBest: []string{"z0-reimaged"},
		},
		{
			name: "upgrading: a reimaged node already holding a replica loses its preference",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false), aks("z0-reimaged", "0", newImage, false),
				aks("z1-old", "1", oldImage, false), aks("z1-reimaged", "1", newImage, false),
			},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-reimaged"), rsPod("a2", "rs-a", "z0-reimaged")},
			// Both zones hold one; the host dimension then picks the old nodes, which hold none.
			wantBest: []string{"z0-old", "z1-old"},
		},
		{
			name: "upgrading: a dense workload fills reimaged nodes up to their share of the zone",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false), aks("z0-reimaged", "0", newImage, false), aks("z0-full", "0", newImage, false),
				aks("z1-reimaged", "1", newImage, false),
			},
			existing: []*v1.Pod{
				rsPod("a1", "rs-a", "z0-old"), rsPod("a2", "rs-a", "z0-reimaged"), rsPod("a3", "rs-a", "z0-full"), rsPod("a4", "rs-a", "z0-full"),
				rsPod("b1", "rs-a", "z1-reimaged"), rsPod("b2", "rs-a", "z1-reimaged"), rsPod("b3", "rs-a", "z1-reimaged"),
				rsPod("b4", "rs-a", "z1-reimaged"), rsPod("b5", "rs-a", "z1-reimaged"),
			},
			// Zone 0: 4 replicas on 3 nodes, a share of 2 with the new one; z0-reimaged holds 1.
			wantBest: []string{"z0-reimaged"},
		},
		{
			name: "upgrading: the zone still comes first",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false), aks("z0-surge", "0", newImage, true),
				aks("z1-old", "1", oldImage, false), aks("z1-reimaged", "1", newImage, false),
			},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-reimaged")},
			wantBest: []string{"z0-old", "z0-surge"},
		},
		{
			name: "upgrading: a staying node of a zone below its end share before the emptier zone's leaving nodes",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false), aks("z0-surge", "0", newImage, true),
				aks("z1-old", "1", oldImage, false), aks("z1-reimaged", "1", newImage, false),
			},
			// 4 replicas with this one: 2 per zone at the end. Zone 1 holds 2, both on a node
			// that leaves: one more on its reimaged node stays within its end share.
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z0-old"), rsPod("a2", "rs-a", "z1-old"), rsPod("a3", "rs-a", "z1-old")},
			wantBest: []string{"z1-reimaged"},
		},
		{
			name: "upgrading: a zone whose staying nodes hold its end share gets no more ahead of the order",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false), aks("z0-surge", "0", newImage, true),
				aks("z1-old", "1", oldImage, false), aks("z1-reimaged", "1", newImage, false), aks("z1-reimaged-b", "1", newImage, false),
			},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z0-old"), rsPod("a2", "rs-a", "z1-reimaged"), rsPod("a3", "rs-a", "z1-reimaged")},
			// The strict order: zone 0, then the host dimension (the surge node holds none).
			wantBest: []string{"z0-surge"},
		},
		{
			name: "upgrading: a staying node without the zone's keys has no end share to exceed",
			nodes: []*v1.Node{
				aks("z0-old", "0", oldImage, false),
				aks("z1-old", "1", oldImage, false), aks("z1-reimaged", "1", newImage, false), aks("nozone-reimaged", "", newImage, false),
			},
			// Both staying nodes settle; on the zone the unlabelled one counts as the least
			// loaded zone (1 replica), z1-reimaged as its own (2).
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z0-old"), rsPod("a2", "rs-a", "z1-old"), rsPod("a3", "rs-a", "z1-old")},
			wantBest: []string{"nozone-reimaged"},
		},
		{
			name: "upgrading: fewer replicas than zones, no end share: the strict order, the unlabelled node not ahead",
			nodes: []*v1.Node{
				aks("z0-reimaged", "0", newImage, false), aks("z1-reimaged", "1", newImage, false), aks("z2-old", "2", oldImage, false),
				aks("nozone-reimaged", "", newImage, false),
			},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-reimaged")},
			wantBest: []string{"z0-reimaged"},
		},
		{
			name:     "no upgrade: generations alike, every node of the emptier zone ties",
			nodes:    []*v1.Node{aks("z0-a", "0", oldImage, false), aks("z0-b", "0", oldImage, true), aks("z1-a", "1", oldImage, false)},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-a")},
			wantBest: []string{"z0-a", "z0-b"},
		},
		{
			name:     "no upgrade: a node with a lifecycle condition True scores below its zone's other nodes",
			nodes:    []*v1.Node{draining, aks("z0-a", "0", oldImage, false), aks("z1-a", "1", oldImage, false)},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-a")},
			wantBest: []string{"z0-a"},
		},
		{
			name:     "no upgrade: a deletion candidate scores below its zone's other nodes",
			nodes:    []*v1.Node{candidate, aks("z0-b", "0", oldImage, false), aks("z1-a", "1", oldImage, false)},
			existing: []*v1.Pod{rsPod("a1", "rs-a", "z1-a")},
			wantBest: []string{"z0-b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			pl := newTestPlugin(t, tCtx, defaultArgs(), tt.existing, tt.nodes)
			got, status := scores(t, tCtx, pl, rsPod("new", "rs-a", ""), tt.nodes)
			if !status.IsSuccess() {
				t.Fatal(status)
			}
			if diff := cmp.Diff(tt.wantBest, best(got)); diff != "" {
				t.Errorf("best nodes (-want +got):\n%s\nscores: %v", diff, got)
			}
		})
	}
}

// TestRawScoreBits: every component of the raw score fits in an int64 without its sign bit,
// for every number of dimensions, with cell layering and without: settles' bit, the counts
// (and the cell and diagonal with layering) and moves' bits.
func TestRawScoreBits(t *testing.T) {
	for dims := 1; dims <= validation.MaxSpreadDimensions; dims++ {
		used := 1 + dims*countBits + fateBits
		if dims >= 3 { // layered: two more components, rawBits shared
			bits := rawBits / (dims + 2)
			used = 1 + (dims+2)*bits + fateBits
		}
		if used > 63 {
			t.Errorf("%d dimensions: the raw score takes %d bits, more than an int64's 63", dims, used)
		}
	}
}
