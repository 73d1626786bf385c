package domainspread

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
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
