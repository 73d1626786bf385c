package domainspread

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

// filterAll runs PreFilter and Filter over nodes and returns the feasible ones.
func filterAll(t *testing.T, ctx context.Context, pl *DomainSpread, pod *v1.Pod, nodes []*v1.Node) ([]string, *fwk.Status) {
	t.Helper()
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, nil); !status.IsSuccess() {
		return nil, status
	}
	var feasible []string
	for _, n := range nodes {
		ni, _ := pl.sharedLister.NodeInfos().Get(n.Name)
		if status := pl.Filter(ctx, state, pod, ni); status.IsSuccess() {
			feasible = append(feasible, n.Name)
		} else if status.Code() != fwk.Unschedulable && status.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("Filter error: %v", status)
		}
	}
	sort.Strings(feasible)
	return feasible, nil
}

func TestFilterHardMode(t *testing.T) {
	hard := func(a *config.DomainSpreadArgs) { a.Mode = config.SpreadHard }
	udOnly := func(a *config.DomainSpreadArgs) {
		a.Mode = config.SpreadHard
		a.Dimensions = []config.SpreadDimension{{Name: "update-domain", LabelKeys: []string{udKey}}}
	}
	tests := []struct {
		name         string
		args         func(*config.DomainSpreadArgs)
		nodes        []*v1.Node
		existing     []*v1.Pod
		wantFeasible []string
		wantSkip     bool
	}{
		{name: "Soft mode does not filter", args: func(*config.DomainSpreadArgs) {}, nodes: grid(1, 3), wantSkip: true},
		{
			name:  "empty domains count: a replica more in a loaded domain is refused",
			args:  udOnly,
			nodes: grid(1, 3), existing: []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")},
			wantFeasible: []string{"fd0-ud1", "fd0-ud2"},
		},
		{
			name:  "4 replicas on 3 update domains still schedule",
			args:  udOnly,
			nodes: grid(1, 3), existing: []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0"), rsPod("a2", "rs-a", "fd0-ud1"), rsPod("a3", "rs-a", "fd0-ud2")},
			wantFeasible: []string{"fd0-ud0", "fd0-ud1", "fd0-ud2"},
		},
		{
			name:  "5th replica of 3 update domains avoids the domain with 2",
			args:  udOnly,
			nodes: grid(1, 3), existing: []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0"), rsPod("a2", "rs-a", "fd0-ud1"), rsPod("a3", "rs-a", "fd0-ud2"), rsPod("a4", "rs-a", "fd0-ud0")},
			wantFeasible: []string{"fd0-ud1", "fd0-ud2"},
		},
		{
			name:  "maxSkew 2 allows more",
			args:  func(a *config.DomainSpreadArgs) { udOnly(a); a.MaxSkew = 2 },
			nodes: grid(1, 3), existing: []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")},
			wantFeasible: []string{"fd0-ud0", "fd0-ud1", "fd0-ud2"},
		},
		{
			name:         "every dimension is checked",
			args:         hard,
			nodes:        grid(2, 3),
			existing:     []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")},
			wantFeasible: []string{"fd1-ud1", "fd1-ud2"},
		},
		{
			name: "empty domains the pod cannot use do not hold it back (taint, cordon)",
			args: udOnly,
			nodes: func() []*v1.Node {
				n := grid(1, 4)
				n[2].Spec.Taints = []v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectNoSchedule}}
				n[3].Spec.Unschedulable = true
				return n
			}(),
			existing:     []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0"), rsPod("a2", "rs-a", "fd0-ud1")},
			wantFeasible: []string{"fd0-ud0", "fd0-ud1", "fd0-ud2", "fd0-ud3"},
		},
		{
			name:         "node missing a dimension's keys is ignored for it by default",
			args:         udOnly,
			nodes:        append(grid(1, 2), node("unlabelled", "0", "")),
			existing:     []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")},
			wantFeasible: []string{"fd0-ud1", "unlabelled"},
		},
		{
			name:         "node missing a dimension's keys is refused when configured",
			args:         func(a *config.DomainSpreadArgs) { udOnly(a); a.RejectNodesMissingKeys = true },
			nodes:        append(grid(1, 2), node("unlabelled", "0", "")),
			existing:     []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0")},
			wantFeasible: []string{"fd0-ud1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			args := defaultArgs()
			tt.args(args)
			pl := newTestPlugin(t, ctx, args, tt.existing, tt.nodes)
			got, status := filterAll(t, ctx, pl, rsPod("new", "rs-a", ""), tt.nodes)
			if tt.wantSkip {
				if !status.IsSkip() {
					t.Fatalf("PreFilter = %v, want Skip", status)
				}
				return
			}
			if status != nil {
				t.Fatal(status)
			}
			if diff := cmp.Diff(tt.wantFeasible, got); diff != "" {
				t.Errorf("feasible nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHardModeEligibleDomainsFollowNodeAffinity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	args := defaultArgs()
	args.Mode = config.SpreadHard
	args.Dimensions = []config.SpreadDimension{{Name: "update-domain", LabelKeys: []string{udKey}}}
	nodes := grid(1, 3)
	existing := []*v1.Pod{rsPod("a1", "rs-a", "fd0-ud0"), rsPod("a2", "rs-a", "fd0-ud1")}
	pod := rsPod("new", "rs-a", "")
	// The pod may not use ud2, so ud2's emptiness does not hold the others back.
	pod.Spec.NodeSelector = map[string]string{"example.com/x": "y"}
	for _, n := range nodes[:2] {
		n.Labels["example.com/x"] = "y"
	}
	pl := newTestPlugin(t, ctx, args, existing, nodes)
	got, _ := filterAll(t, ctx, pl, pod, nodes[:2])
	if diff := cmp.Diff([]string{"fd0-ud0", "fd0-ud1"}, got); diff != "" {
		t.Errorf("feasible (-want +got):\n%s", diff)
	}
}
