package maintenance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const (
	oldImage = "AKSUbuntu-2204gen2containerd-202409.30.0"
	newImage = "AKSUbuntu-2204gen2containerd-202410.27.0"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// aksNode is a node of an AKS pool as the upgrade leaves it: pool, image, kubelet version and
// creation time (hours after t0).
func aksNode(name, pool, image, kubelet string, createdHours int) *v1.Node {
	n := st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", pool).Label(NodeImageVersionLabel, image).Obj()
	n.Status.NodeInfo.KubeletVersion = kubelet
	n.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(createdHours) * time.Hour))
	return n
}

// karpenterNode is a node of node auto-provisioning's NodePool "nap".
func karpenterNode(name, image string, createdHours int) *v1.Node {
	n := aksNode(name, "nap", image, "v1.34.2", createdHours)
	n.Labels[KarpenterNodePoolLabel] = "nap"
	return n
}

func TestGenerationCompare(t *testing.T) {
	tests := []struct {
		a, b Generation
		want int
	}{
		{a: Generation{Kubelet: "v1.34.2", Image: oldImage}, b: Generation{Kubelet: "v1.34.2", Image: newImage}, want: -1},
		{a: Generation{Kubelet: "v1.35.0", Image: oldImage}, b: Generation{Kubelet: "v1.34.10", Image: newImage}, want: 1},
		{a: Generation{Kubelet: "v1.34.9"}, b: Generation{Kubelet: "v1.34.10"}, want: -1},
		// SecurityPatch images add a date suffix; the newer patch date sorts later.
		{a: Generation{Image: newImage + "-2024.12.01"}, b: Generation{Image: newImage + "-2024.11.05"}, want: 1},
		{a: Generation{Image: "AKSUbuntu-2204gen2containerd-202409.9.0"}, b: Generation{Image: "AKSUbuntu-2204gen2containerd-202409.10.0"}, want: -1},
		{a: Generation{Kubelet: "not-a-version"}, b: Generation{Kubelet: "v1.30.0"}, want: -1},
		{a: Generation{Kubelet: "v1.34.2", Image: newImage}, b: Generation{Kubelet: "v1.34.2", Image: newImage}, want: 0},
	}
	for _, tt := range tests {
		if got := tt.a.Compare(tt.b); got != tt.want {
			t.Errorf("%+v.Compare(%+v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := tt.b.Compare(tt.a); got != -tt.want {
			t.Errorf("%+v.Compare(%+v) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestFatesOf(t *testing.T) {
	cordoned := aksNode("old-cordoned", "user", oldImage, "v1.34.2", 0)
	cordoned.Spec.Unschedulable = true
	candidate := aksNode("candidate", "batch", oldImage, "v1.34.2", 0)
	candidate.Spec.Taints = []v1.Taint{{Key: TaintDeletionCandidate, Effect: v1.TaintEffectPreferNoSchedule}}
	disrupted := aksNode("disrupted", "batch", oldImage, "v1.34.2", 0)
	disrupted.Spec.Taints = []v1.Taint{{Key: TaintKarpenterDisrupted, Effect: v1.TaintEffectNoSchedule}}
	nodes := []*v1.Node{
		// "user" upgrades: two old nodes, one reimaged in place (old creation time), two surge nodes.
		aksNode("old-1", "user", oldImage, "v1.34.2", 0),
		aksNode("old-2", "user", oldImage, "v1.34.2", 5),
		aksNode("reimaged", "user", newImage, "v1.34.2", 1),
		aksNode("surge-1", "user", newImage, "v1.34.2", 48),
		aksNode("surge-2", "user", newImage, "v1.34.2", 48),
		cordoned,
		// "batch" is not upgrading: one generation.
		aksNode("batch-1", "batch", oldImage, "v1.34.2", 0),
		candidate,
		disrupted,
		// "k8s" upgrades its Kubernetes version: the kubelet version decides.
		aksNode("k8s-old", "k8s", newImage, "v1.33.5", 0),
		aksNode("k8s-new", "k8s", newImage, "v1.34.2", 30),
		// Karpenter drift: the replacement stays, the drifted node leaves.
		karpenterNode("nap-old", oldImage, 0),
		karpenterNode("nap-new", newImage, 30),
		// A node without a pool label is never judged by generation.
		st.MakeNode().Name("no-pool").Obj(),
	}
	got := FatesOf(pool.Identity{}, nodes)
	want := map[string]Fate{
		"old-1": Leaving, "old-2": Leaving, "reimaged": Stays, "surge-1": Surge, "surge-2": Surge, "old-cordoned": Leaving,
		"batch-1": Stays, "candidate": Leaving, "disrupted": Leaving,
		"k8s-old": Leaving, "k8s-new": Surge,
		"nap-old": Leaving, "nap-new": Stays,
		"no-pool": Stays,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fates (-want +got):\n%s", diff)
	}
}

// TestFatesOfMixedFlavours: a NAP or Karpenter NodePool runs several flavours of one image side
// by side (amd64 and arm64 instance types, Hyper-V generation 1 and 2): none is older than
// another, so the pool is not upgrading; an image is older only than a newer one of its flavour,
// and a kubelet older than the pool's newest is older whatever its flavour.
func TestFatesOfMixedFlavours(t *testing.T) {
	const (
		arm64Old = "AKSUbuntu-2204gen2arm64containerd-202409.30.0"
		arm64New = "AKSUbuntu-2204gen2arm64containerd-202410.27.0"
		gen1     = "AKSUbuntu-2204containerd-202409.30.0"
	)
	arm := func(n *v1.Node) *v1.Node { n.Labels[v1.LabelArchStable] = "arm64"; return n }
	amd := func(n *v1.Node) *v1.Node { n.Labels[v1.LabelArchStable] = "amd64"; return n }
	kubelet := func(n *v1.Node, v string) *v1.Node { n.Status.NodeInfo.KubeletVersion = v; return n }
	tests := []struct {
		name  string
		nodes []*v1.Node
		want  map[string]Fate
	}{{
		name: "amd64 and arm64 of one image date",
		nodes: []*v1.Node{amd(karpenterNode("x86-1", oldImage, 0)), arm(karpenterNode("arm-1", arm64Old, 1)),
			amd(karpenterNode("x86-2", oldImage, 2))},
		want: map[string]Fate{"x86-1": Stays, "arm-1": Stays, "x86-2": Stays},
	}, {
		name:  "gen1 and gen2 of different dates",
		nodes: []*v1.Node{amd(aksNode("gen1", "nap", gen1, "v1.34.2", 0)), amd(aksNode("gen2", "nap", newImage, "v1.34.2", 1))},
		want:  map[string]Fate{"gen1": Stays, "gen2": Stays},
	}, {
		name: "the arm64 flavour drifts to a newer image, amd64 stays",
		nodes: []*v1.Node{amd(karpenterNode("x86-1", oldImage, 0)), arm(karpenterNode("arm-old", arm64Old, 1)),
			arm(karpenterNode("arm-new", arm64New, 30))},
		want: map[string]Fate{"x86-1": Stays, "arm-old": Leaving, "arm-new": Stays},
	}, {
		name:  "the same image name on two architectures",
		nodes: []*v1.Node{amd(aksNode("x86", "user", oldImage, "v1.34.2", 0)), arm(aksNode("arm", "user", newImage, "v1.34.2", 1))},
		want:  map[string]Fate{"x86": Stays, "arm": Stays},
	}, {
		name: "a Kubernetes upgrade moves every flavour",
		nodes: []*v1.Node{amd(aksNode("x86-old", "user", oldImage, "v1.33.5", 0)), arm(aksNode("arm-old", "user", arm64Old, "v1.33.5", 0)),
			kubelet(amd(aksNode("x86-new", "user", newImage, "", 30)), "v1.34.2"), kubelet(arm(aksNode("arm-new", "user", arm64New, "", 30)), "v1.34.2")},
		want: map[string]Fate{"x86-old": Leaving, "arm-old": Leaving, "x86-new": Surge, "arm-new": Surge},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FatesOf(pool.Identity{}, tc.nodes)); diff != "" {
				t.Errorf("fates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitImage(t *testing.T) {
	tests := []struct{ label, name, image string }{
		{"AKSUbuntu-2204gen2containerd-202410.27.0", "AKSUbuntu-2204gen2containerd", "202410.27.0"},
		{"AKSUbuntu-2204gen2containerd-202410.27.0-2024.12.01", "AKSUbuntu-2204gen2containerd", "202410.27.0-2024.12.01"},
		{"AKSUbuntu-2204gen2arm64containerd-202410.27.0", "AKSUbuntu-2204gen2arm64containerd", "202410.27.0"},
		{"AzureLinux-V2gen2-202410.27.0", "AzureLinux-V2gen2", "202410.27.0"},
		{"AKSWindows-2022-containerd-20348.2762.241009", "AKSWindows-2022-containerd", "20348.2762.241009"},
		{"202410.27.0", "", "202410.27.0"},
		{"custom-image", "", "custom-image"},
		{"", "", ""},
	}
	for _, tc := range tests {
		name, image := splitImage(tc.label)
		if name != tc.name || image != tc.image {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tc.label, name, image, tc.name, tc.image)
		}
	}
}

// TestRolloutsFollowAnUpgrade plays a surge upgrade through the tracker: the view changes only
// when a pool's upgrade state does, and every step's fates are those the upgrade gives.
func TestRolloutsFollowAnUpgrade(t *testing.T) {
	r := NewRollouts(pool.Identity{})
	a := aksNode("a", "user", oldImage, "v1.34.2", 0)
	b := aksNode("b", "user", oldImage, "v1.34.2", 1)
	r.Upsert(a)
	r.Upsert(b)
	if r.View().Upgrading() {
		t.Fatal("one generation: no upgrade")
	}
	epoch := r.View().Epoch
	// A status heartbeat (same generation) does not republish.
	beat := b.DeepCopy()
	beat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	r.Upsert(beat)
	if r.View().Epoch != epoch {
		t.Error("a heartbeat republished the view")
	}
	surge := aksNode("surge", "user", newImage, "v1.34.2", 24)
	r.Upsert(surge)
	fates := func() map[string]Fate {
		v := r.View()
		out := map[string]Fate{}
		for _, n := range []*v1.Node{a, b, surge} {
			out[n.Name] = v.FateOf(pool.Identity{}, n)
		}
		return out
	}
	if diff := cmp.Diff(map[string]Fate{"a": Leaving, "b": Leaving, "surge": Surge}, fates()); diff != "" {
		t.Errorf("surge created (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"user"}, r.View().UpgradingPools()); diff != "" {
		t.Errorf("upgrading pools (-want +got):\n%s", diff)
	}
	// a is reimaged in place: same name and creation time, new image.
	a = aksNode("a", "user", newImage, "v1.34.2", 0)
	r.Upsert(a)
	if diff := cmp.Diff(map[string]Fate{"a": Stays, "b": Leaving, "surge": Surge}, fates()); diff != "" {
		t.Errorf("a reimaged (-want +got):\n%s", diff)
	}
	// b too: one generation again, the upgrade is over; the surge node is cordoned and deleted.
	b = aksNode("b", "user", newImage, "v1.34.2", 1)
	r.Upsert(b)
	if r.View().Upgrading() {
		t.Error("every node on the new image: still upgrading")
	}
	surge.Spec.Unschedulable = true
	r.Upsert(surge)
	if diff := cmp.Diff(map[string]Fate{"a": Stays, "b": Stays, "surge": Leaving}, fates()); diff != "" {
		t.Errorf("upgrade over, surge cordoned (-want +got):\n%s", diff)
	}
	r.Delete("surge")
	r.Delete("unknown")
	if r.View().Upgrading() {
		t.Error("still upgrading after the surge node left")
	}
}

// TestFateOfDoesNotAllocate: the scheduler calls it for every node it scores during an upgrade.
func TestFateOfDoesNotAllocate(t *testing.T) {
	nodes := []*v1.Node{aksNode("old", "user", oldImage, "v1.34.2", 0), aksNode("new", "user", newImage, "v1.34.2", 9)}
	r := NewRollouts(pool.Identity{})
	for _, n := range nodes {
		r.Upsert(n)
	}
	v := r.View()
	if allocs := testing.AllocsPerRun(100, func() {
		for _, n := range nodes {
			v.FateOf(pool.Identity{}, n)
		}
	}); allocs != 0 {
		t.Errorf("FateOf allocates %v times per call pair", allocs)
	}
}

// TestRolloutsFollowLifecycleConditions: a node with a KEP-5683 lifecycle condition True is
// Leaving, in a pool or not and whether or not its pool upgrades, until the condition is False
// or gone; heartbeats that keep the conditions as they are do not republish the view.
func TestRolloutsFollowLifecycleConditions(t *testing.T) {
	condition := func(n *v1.Node, t v1.NodeConditionType, s v1.ConditionStatus) *v1.Node {
		n = n.DeepCopy()
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue}, v1.NodeCondition{Type: t, Status: s})
		return n
	}
	a := aksNode("a", "user", oldImage, "v1.34.2", 0)
	b := aksNode("b", "user", oldImage, "v1.34.2", 1)
	loose := st.MakeNode().Name("no-pool").Obj()
	r := NewRollouts(pool.Identity{})
	for _, n := range []*v1.Node{a, b, loose} {
		r.Upsert(n)
	}
	fates := func(nodes ...*v1.Node) map[string]Fate {
		v := r.View()
		out := map[string]Fate{}
		for _, n := range nodes {
			out[n.Name] = v.FateOf(pool.Identity{}, n)
		}
		return out
	}
	// The KEP's condition types as the KEP spells them: a typo in LifecycleConditions fails.
	kep := []v1.NodeConditionType{"GracefulNodeShutdownInProgress", "DrainInProgress", "Drained", "MaintenancePlanned", "MaintenanceInProgress"}
	if diff := cmp.Diff(kep, LifecycleConditions[:]); diff != "" {
		t.Errorf("LifecycleConditions (-KEP +got):\n%s", diff)
	}
	for _, tc := range kep {
		t.Run(string(tc), func(t *testing.T) {
			planned, loosePlanned := condition(a, tc, v1.ConditionTrue), condition(loose, tc, v1.ConditionTrue)
			r.Upsert(planned)
			r.Upsert(loosePlanned)
			if !r.View().InLifecycle() {
				t.Error("InLifecycle() = false with a condition True")
			}
			if diff := cmp.Diff(map[string]Fate{"a": Leaving, "b": Stays, "no-pool": Leaving}, fates(planned, b, loosePlanned)); diff != "" {
				t.Errorf("%s True (-want +got):\n%s", tc, diff)
			}
			epoch := r.View().Epoch
			r.Upsert(condition(a, tc, v1.ConditionTrue))
			if r.View().Epoch != epoch {
				t.Error("a heartbeat keeping the condition republished the view")
			}
			cleared := condition(a, tc, v1.ConditionFalse)
			r.Upsert(cleared)
			r.Delete(loose.Name)
			if r.View().InLifecycle() {
				t.Error("InLifecycle() = true after the condition was cleared and the node deleted")
			}
			if diff := cmp.Diff(map[string]Fate{"a": Stays, "b": Stays}, fates(cleared, b)); diff != "" {
				t.Errorf("%s False (-want +got):\n%s", tc, diff)
			}
			r.Upsert(loose)
		})
	}
}

// TestRolloutsReimageRecreatesTheNode: AKS probably deletes a reimaged node's Node object and
// registers it again under the same name, with a new creation time (docs/maintenance.md). The
// tracker remembers the names it saw on the older generation, so the node still stays; a
// tracker that starts after the reimage cannot know and takes it for a surge node.
func TestRolloutsReimageRecreatesTheNode(t *testing.T) {
	r := NewRollouts(pool.Identity{})
	for _, n := range []*v1.Node{aksNode("a", "user", oldImage, "v1.34.2", 0), aksNode("b", "user", oldImage, "v1.34.2", 1)} {
		r.Upsert(n)
	}
	surge := aksNode("surge", "user", newImage, "v1.34.2", 24)
	r.Upsert(surge)
	// a is drained, deleted and registered again, 30 hours in, on the new image.
	r.Delete("a")
	a := aksNode("a", "user", newImage, "v1.34.2", 30)
	r.Upsert(a)
	b := aksNode("b", "user", oldImage, "v1.34.2", 1)
	v := r.View()
	got := map[string]Fate{"a": v.FateOf(pool.Identity{}, a), "b": v.FateOf(pool.Identity{}, b), "surge": v.FateOf(pool.Identity{}, surge)}
	if diff := cmp.Diff(map[string]Fate{"a": Stays, "b": Leaving, "surge": Surge}, got); diff != "" {
		t.Errorf("a re-registered after its reimage (-want +got):\n%s", diff)
	}
	// A tracker started now (a scheduler restarted mid-upgrade) has not seen a on the old image.
	if f := FatesOf(pool.Identity{}, []*v1.Node{a, b, surge})["a"]; f != Surge {
		t.Errorf("a fresh tracker calls the re-registered node %v, want surge (it cannot tell)", f)
	}
	// The upgrade ends: b reimaged in place; the memory goes with the upgrade.
	r.Upsert(aksNode("b", "user", newImage, "v1.34.2", 1))
	if r.View().Upgrading() {
		t.Fatal("one generation left: still upgrading")
	}
	// The next upgrade starts from nothing remembered: a surge node of it is a surge node.
	next := "AKSUbuntu-2204gen2containerd-202411.20.0"
	surge2 := aksNode("surge-2", "user", next, "v1.34.2", 60)
	r.Upsert(surge2)
	if f := r.View().FateOf(pool.Identity{}, surge2); f != Surge {
		t.Errorf("next upgrade's surge node: %v, want surge", f)
	}
}
