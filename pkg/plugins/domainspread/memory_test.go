package domainspread

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

// BenchmarkMemory measures what DomainSpread, as the shipped configuration sets it up (Soft,
// zone / update domain / host), holds per node once every node has been scored: its memo of
// each node version's domain IDs and its table of interned domains (one host per node). Nodes
// and the scheduler's snapshot exist before the measurement and are not counted; nor is the
// replica index, which is empty here (no pods) and measured per pod by
// BenchmarkReplicaIndexMemory. ns/op is one scoring cycle (PreScore, Score on every node).
func BenchmarkMemory(b *testing.B) {
	for _, n := range plugintest.MemoryNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkMemory(b, n) })
	}
}

func benchmarkMemory(b *testing.B, n int) {
	ktesting.SetDefaultVerbosity(0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2)))))
	defer cancel()
	args := plugintest.ShippedArgs(b, Name).(*config.DomainSpreadArgs)
	nodes := plugintest.PerfNodes(n)
	snapshot := cache.NewSnapshot(nil, nodes)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	// The scheduler's pod informer (no pods) runs before the plugin exists: it is not ours.
	informerFactory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	informerFactory.Core().V1().Pods().Informer()
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithSnapshotSharedLister(snapshot), frameworkruntime.WithInformerFactory(informerFactory))
	if err != nil {
		b.Fatal(err)
	}
	pod := st.MakePod().Namespace("default").Name("web-0").UID("web-0").
		OwnerReference("web", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj()

	var pl *DomainSpread
	cycle := func() {
		state := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, state, pod, infos); !s.IsSkip() {
			b.Fatalf("PreFilter in Soft mode = %v, want Skip", s)
		}
		if s := pl.PreScore(ctx, state, pod, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		for _, ni := range infos {
			if _, s := pl.Score(ctx, state, pod, ni); !s.IsSuccess() {
				b.Fatal(s)
			}
		}
	}
	grown := plugintest.HeapGrowth(b, fmt.Sprintf("heap-%s-nodes=%d", Name, n), func() any {
		p, err := New(ctx, args, fh)
		if err != nil {
			b.Fatal(err)
		}
		pl = p.(*DomainSpread)
		// One replica of the workload placed: PreScore skips a workload's first replica (every
		// node would score alike), and the measured cycles must score every node.
		placed := st.MakePod().Namespace("default").Name("web-1").UID("web-1").
			OwnerReference("web", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj()
		if s := pl.Reserve(ctx, framework.NewCycleState(), placed, nodes[0].Name); !s.IsSuccess() {
			b.Fatal(s)
		}
		// The first cycle resolves every node's domains, the second one's PreScore folds them
		// into the memo's read table: the steady state.
		cycle()
		cycle()
		return pl
	})
	defer pl.Close()
	// Refuse to report a figure for state that is not there.
	if got := pl.nodeDomains.Len(); got != n {
		b.Fatalf("the memo holds %d node versions, want %d", got, n)
	}
	for d, want := range []int{2, 3, n} {
		if got := pl.domains.len(d); got != want {
			b.Fatalf("dimension %s has %d domains, want %d", pl.dims[d].name, got, want)
		}
	}
	for b.Loop() {
		cycle()
	}
	// After the loop: its first iteration resets the timer, which drops reported metrics.
	b.ReportMetric(float64(grown), "plugin-bytes")
	b.ReportMetric(float64(grown)/float64(n), "plugin-bytes/node")
	runtime.KeepAlive(nodes)
}

// replicaIndexPodCounts are the numbers of pods BenchmarkReplicaIndexMemory measures.
var replicaIndexPodCounts = []int{10000, 50000, 150000}

// BenchmarkReplicaIndexMemory measures the replica index's memory per pod: ReplicaSet pods, 5
// replicas per set, spread over 15 000 nodes, fed through the handler the scheduler's pod
// informer calls. The pods (the informer's objects) exist before the measurement; the index
// refers to their namespace, UID and node name strings without copying them, so only the index's
// own maps count. ns/op is one informer update of a pod that did not move.
func BenchmarkReplicaIndexMemory(b *testing.B) {
	for _, n := range replicaIndexPodCounts {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) { benchmarkReplicaIndexMemory(b, n) })
	}
}

func benchmarkReplicaIndexMemory(b *testing.B, n int) {
	const (
		nodes    = 15000
		replicas = 5
	)
	logger := klog.NewKlogr()
	nodeNames := make([]string, nodes)
	for i := range nodeNames {
		nodeNames[i] = fmt.Sprintf("perf-node-%d", i)
	}
	pods := make([]*v1.Pod, n)
	for i := range pods {
		// Consecutive pods of a set land on nodes far apart, as a spread would place them.
		pods[i] = rsPod(fmt.Sprintf("pod-%d", i), fmt.Sprintf("rs-%d", i/replicas), nodeNames[(i*7919)%nodes])
	}
	var x *replicaIndex
	var handler interface {
		OnAdd(obj any, isInInitialList bool)
		OnUpdate(oldObj, newObj any)
	}
	grown := plugintest.HeapGrowth(b, fmt.Sprintf("heap-replicaindex-pods=%d", n), func() any {
		x = newReplicaIndex()
		handler = x.handler(logger)
		for _, p := range pods {
			handler.OnAdd(p, true)
		}
		return x
	})
	if got := x.len(); got != n {
		b.Fatalf("the index counts %d pods, want %d", got, n)
	}
	if got, want := len(x.nodes), n/replicas; got != want {
		b.Fatalf("the index has %d workloads, want %d", got, want)
	}
	i := 0
	for b.Loop() {
		p := pods[i%n]
		handler.OnUpdate(p, p)
		i++
	}
	b.ReportMetric(float64(grown), "index-bytes")
	b.ReportMetric(float64(grown)/float64(n), "replica-index-bytes/pod")
	runtime.KeepAlive(pods)
}
