package domainspread

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
)

func TestPreemptionAdjustsCounts(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	args := defaultArgs()
	args.Mode = config.SpreadHard
	args.Dimensions = []config.SpreadDimension{{Name: "update-domain", LabelKeys: []string{udKey}}}
	nodes := grid(1, 2)
	victim := rsPod("a2", "rs-a", "fd0-ud0")
	pl := newTestPlugin(t, ctx, args, []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0"), victim}, nodes)
	state := framework.NewCycleState()
	pod := rsPod("new", "rs-a", "")
	pl.PreFilter(ctx, state, pod, nil)
	ni, _ := pl.sharedLister.NodeInfos().Get("fd0-ud0")
	if pl.Filter(ctx, state, pod, ni).IsSuccess() {
		t.Fatal("ud0 with 2 replicas against 0 was feasible")
	}
	victimInfo, _ := framework.NewPodInfo(victim)
	clone := state.Clone()
	if status := pl.RemovePod(ctx, clone, pod, victimInfo, ni); !status.IsSuccess() {
		t.Fatal(status)
	}
	// After removing one victim, ud0 holds 1 against 0: one more makes skew 2, still refused;
	// after both, it is feasible. The original state is untouched.
	first, _ := framework.NewPodInfo(rsPod("a1", "rs-a", "fd0-ud0"))
	pl.RemovePod(ctx, clone, pod, first, ni)
	if status := pl.Filter(ctx, clone, pod, ni); !status.IsSuccess() {
		t.Errorf("after removing both replicas: %v", status)
	}
	if pl.Filter(ctx, state, pod, ni).IsSuccess() {
		t.Error("RemovePod on a clone changed the original state")
	}
	pl.AddPod(ctx, clone, pod, first, ni)
	pl.AddPod(ctx, clone, pod, victimInfo, ni)
	if pl.Filter(ctx, clone, pod, ni).IsSuccess() {
		t.Error("AddPod did not restore the counts")
	}

	// A victim the counts never held (assumed by another profile) must not drive ud1 below 0:
	// the minimum would turn -1 and ud1 itself (0 + 1 - (-1) = 2 > maxSkew) would be refused.
	other := state.Clone()
	ud1, _ := pl.sharedLister.NodeInfos().Get("fd0-ud1")
	stranger, _ := framework.NewPodInfo(rsPod("a9", "rs-a", "fd0-ud1"))
	pl.RemovePod(ctx, other, pod, stranger, ud1)
	if status := pl.Filter(ctx, other, pod, ud1); !status.IsSuccess() {
		t.Errorf("ud1 after removing a replica it was not counted with: %v", status)
	}
}

// TestSurgeBatchReported: while a pool upgrades, the placement that takes a workload past a
// third of its replicas on the surge nodes (drained together at the upgrade's end) is counted,
// once per crossing; placements elsewhere are not.
func TestSurgeBatchReported(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const oldImage, newImage = "AKSUbuntu-2204gen2containerd-202409.30.0", "AKSUbuntu-2204gen2containerd-202410.27.0"
	now := metav1.Now()
	aks := func(name, image string, surge bool) *v1.Node {
		n := node(name, "0", "0")
		n.Labels["kubernetes.azure.com/agentpool"] = "user"
		n.Labels[maintenance.NodeImageVersionLabel] = image
		n.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
		if surge {
			n.CreationTimestamp = now
		}
		return n
	}
	nodes := []*v1.Node{aks("old-1", oldImage, false), aks("old-2", oldImage, false), aks("reimaged", newImage, false),
		aks("surge-1", newImage, true), aks("surge-2", newImage, true)}
	pl := newTestPlugin(t, ctx, defaultArgs(), []*v1.Pod{rsPod("a1", "rs-a", "old-1"), rsPod("a2", "rs-a", "old-2")}, nodes)
	before, err := testutil.GetCounterMetricValue(surgeBatchTotal)
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(name, nodeName string) float64 {
		t.Helper()
		pl.Reserve(ctx, framework.NewCycleState(), rsPod(name, "rs-a", ""), nodeName)
		v, err := testutil.GetCounterMetricValue(surgeBatchTotal)
		if err != nil {
			t.Fatal(err)
		}
		return v - before
	}
	for _, s := range []struct {
		pod, node string
		want      float64
	}{
		{pod: "a3", node: "surge-1", want: 0},  // 1 of 3 on surge nodes: a third, not more
		{pod: "a4", node: "surge-2", want: 1},  // 2 of 4: past a third
		{pod: "a5", node: "surge-1", want: 1},  // 3 of 5: still past, no second report
		{pod: "a6", node: "reimaged", want: 1}, // not a surge node
	} {
		if got := reserve(s.pod, s.node); got != s.want {
			t.Errorf("after %s on %s: %v reports, want %v", s.pod, s.node, got, s.want)
		}
	}
}
