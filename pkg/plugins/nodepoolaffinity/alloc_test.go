package nodepoolaffinity

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

// TestPreFilterDoesNotAllocatePerNode: once the pool index has swept the snapshot, PreFilter
// allocates nothing per node, like the other plugins' Filter and Score: a pod pinned to one pool
// gets the index's own set (3 allocations: its pins and the result), an unpinned pod only the Skip
// status. The count is the same on 100 and 2000 nodes.
func TestPreFilterDoesNotAllocatePerNode(t *testing.T) {
	pinned := st.MakePod().Namespace("default").Name("web-0").NodeSelector(map[string]string{"kubernetes.azure.com/agentpool": "small-3"}).Obj()
	unpinned := st.MakePod().Namespace("default").Name("free-0").Obj()
	allocs := func(t *testing.T, n int, pod *v1.Pod, wantNarrowed bool) float64 {
		t.Helper()
		_, ctx := ktesting.NewTestContext(t)
		snapshot := cache.NewSnapshot(nil, plugintest.PoolNodes(n))
		fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(ctx, plugintest.ShippedArgs(t, Name), fh)
		if err != nil {
			t.Fatal(err)
		}
		pl := p.(*NodePoolAffinity)
		state := framework.NewCycleState()
		res, s := pl.PreFilter(ctx, state, pod, nil) // the first call sweeps the snapshot
		if narrowed := s.IsSuccess() && res != nil; narrowed != wantNarrowed {
			t.Fatalf("%d nodes: PreFilter narrowed %v (%v, %v), want %v", n, narrowed, res, s, wantNarrowed)
		}
		return testing.AllocsPerRun(50, func() { pl.PreFilter(ctx, state, pod, nil) })
	}
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantNarrowed bool
		max          float64
	}{
		{name: "pinned to one pool", pod: pinned, wantNarrowed: true, max: 3},
		{name: "pinned to none", pod: unpinned, max: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			small, large := allocs(t, 100, tt.pod, tt.wantNarrowed), allocs(t, 2000, tt.pod, tt.wantNarrowed)
			t.Logf("allocations per PreFilter: %v on 100 nodes, %v on 2000", small, large)
			if small != large || large > tt.max {
				t.Errorf("PreFilter allocates %v times on 100 nodes and %v on 2000, want the same and at most %v", small, large, tt.max)
			}
		})
	}
}
