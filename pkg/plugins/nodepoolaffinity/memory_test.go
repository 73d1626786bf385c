package nodepoolaffinity

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

// BenchmarkMemory measures what NodePoolAffinity, as the shipped configuration sets it up, holds
// per node once its pool index has swept the snapshot: each node's pool values and its name in
// its pool's set. Nodes are the pool-cluster workload's (30 pools); they and the scheduler's
// snapshot exist before the measurement and are not counted. ns/op is one PreFilter of a pod
// pinned to a small pool (the steady-state sweep: a pointer and a generation per node).
func BenchmarkMemory(b *testing.B) {
	for _, n := range plugintest.MemoryNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkMemory(b, n) })
	}
}

func benchmarkMemory(b *testing.B, n int) {
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	args := plugintest.ShippedArgs(b, Name)
	nodes := plugintest.PoolNodes(n)
	snapshot := cache.NewSnapshot(nil, nodes)
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		b.Fatal(err)
	}
	pinned := st.MakePod().Namespace("default").Name("web-0").NodeSelector(map[string]string{"kubernetes.azure.com/agentpool": "small-3"}).Obj()
	// small-3 holds the odd nodes i with i/2 % 25 == 3.
	want := 0
	for i := 1; i < n; i += 2 {
		if i/2%25 == 3 {
			want++
		}
	}
	var pl *NodePoolAffinity
	cycle := func() {
		res, s := pl.PreFilter(ctx, framework.NewCycleState(), pinned, nil)
		if !s.IsSuccess() || res == nil || len(res.NodeNames) != want {
			b.Fatalf("PreFilter: %v, %v; want the %d nodes of pool small-3", res, s, want)
		}
	}
	grown := plugintest.HeapGrowth(b, fmt.Sprintf("heap-%s-nodes=%d", Name, n), func() any {
		p, err := New(ctx, args, fh)
		if err != nil {
			b.Fatal(err)
		}
		pl = p.(*NodePoolAffinity)
		cycle()
		return pl
	})
	// Refuse to report a figure for state that is not there.
	if got := len(pl.index.nodes); got != n {
		b.Fatalf("the index holds %d nodes, want %d", got, n)
	}
	for b.Loop() {
		cycle()
	}
	b.ReportMetric(float64(grown), "plugin-bytes")
	b.ReportMetric(float64(grown)/float64(n), "plugin-bytes/node")
	runtime.KeepAlive(nodes)
}
