package systempoolguard

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

// BenchmarkMemory measures what SystemPoolGuard, as the shipped configuration sets it up, holds
// per node once every node has been classified: its memo of each node version's class. Nodes
// (scheduler_perf's: every 20th a system node) and the scheduler's snapshot exist before the
// measurement and are not counted. ns/op is one cycle of a user pod (PreFilter, Filter on every
// node) and one of a system pod (PreScore, Score on every node).
func BenchmarkMemory(b *testing.B) {
	for _, n := range plugintest.MemoryNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkMemory(b, n) })
	}
}

func benchmarkMemory(b *testing.B, n int) {
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	args := plugintest.ShippedArgs(b, Name)
	nodes := plugintest.PerfNodes(n)
	snapshot := cache.NewSnapshot(nil, nodes)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		b.Fatal(err)
	}
	userPod := st.MakePod().Namespace("default").Name("web-0").UID("web-0").
		OwnerReference("web", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj()
	systemPod := st.MakePod().Namespace("kube-system").Name("dns-0").UID("dns-0").
		OwnerReference("dns", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj()
	systemNodes := (n + 19) / 20

	var pl *SystemPoolGuard
	cycle := func() {
		state := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, state, userPod, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		refused := 0
		for _, ni := range infos {
			if !pl.Filter(ctx, state, userPod, ni).IsSuccess() {
				refused++
			}
		}
		if refused != systemNodes {
			b.Fatalf("Filter refused %d nodes to a user pod, want the %d system nodes", refused, systemNodes)
		}
		state = framework.NewCycleState()
		if s := pl.PreScore(ctx, state, systemPod, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		for _, ni := range infos {
			if _, s := pl.Score(ctx, state, systemPod, ni); !s.IsSuccess() {
				b.Fatal(s)
			}
		}
	}
	grown := plugintest.HeapGrowth(b, fmt.Sprintf("heap-%s-nodes=%d", Name, n), func() any {
		p, err := New(ctx, args, fh)
		if err != nil {
			b.Fatal(err)
		}
		pl = p.(*SystemPoolGuard)
		// The first cycle classifies every node, the second one's PreFilter folds the classes
		// into the memo's read table: the steady state.
		cycle()
		cycle()
		return pl
	})
	// Refuse to report a figure for state that is not there.
	if got := pl.classes.Len(); got != n {
		b.Fatalf("the memo holds %d node versions, want %d", got, n)
	}
	for b.Loop() {
		cycle()
	}
	// After the loop: its first iteration resets the timer, which drops reported metrics.
	b.ReportMetric(float64(grown), "plugin-bytes")
	b.ReportMetric(float64(grown)/float64(n), "plugin-bytes/node")
	runtime.KeepAlive(nodes)
}
