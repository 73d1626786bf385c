package nodepoolready

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

// BenchmarkMemory measures what NodePoolReady, with the shipped configuration's args, holds per
// node once every node has been judged: its memo of verdicts per node version and its census.
// The cluster is scheduler_perf's nodes with a NodePoolLabelSet per pool whose label every node carries (the
// installed benchmark's setup), so every node is ready, as in a steady state. Nodes, label sets
// and the scheduler's snapshot exist before the measurement and are not counted. The plugin is
// built as New builds it, without the NodePoolLabelSet informer (which needs an apiserver): the
// index is filled with the sets directly. ns/op is one filter cycle (PreFilter, Filter on every
// node).
func BenchmarkMemory(b *testing.B) {
	for _, n := range plugintest.MemoryNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkMemory(b, n) })
	}
}

func benchmarkMemory(b *testing.B, n int) {
	const labelSetKey = "example.com/pool-labels"
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	logger := klog.FromContext(ctx)
	args := plugintest.ShippedArgs(b, Name).(*config.NodePoolReadyArgs)
	if err := validation.ValidateNodePoolReadyArgs(field.NewPath("args"), args); err != nil {
		b.Fatal(err)
	}
	nodes := plugintest.PerfNodes(n)
	for _, node := range nodes {
		node.Labels[labelSetKey] = node.Labels["kubernetes.azure.com/agentpool"]
	}
	var sets []*labelsv1alpha1.NodePoolLabelSet
	for i, p := range []string{"system", "user"} {
		sets = append(sets, labelSet("pool-scheduler", p, types.UID(fmt.Sprint("set-", i)), 1,
			map[string]labelsv1alpha1.LabelValue{labelSetKey: labelsv1alpha1.LabelValue(p)}))
	}
	snapshot := cache.NewSnapshot(nil, nodes)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	pod := st.MakePod().Namespace("default").Name("web-0").UID("web-0").
		OwnerReference("web", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj()

	var pl *NodePoolReady
	cycle := func() {
		state := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, state, pod, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		for _, ni := range infos {
			if s := pl.Filter(ctx, state, pod, ni); !s.IsSuccess() {
				b.Fatalf("Filter(%s) = %v: every node is ready here", ni.Node().Name, s)
			}
		}
	}
	grown := plugintest.HeapGrowth(b, fmt.Sprintf("heap-%s-nodes=%d", Name, n), func() any {
		idx := newLabelSetIndex(args.LabelSetNamespaces)
		for _, s := range sets {
			if !idx.upsert(logger, s) {
				b.Fatalf("label set %s/%s not indexed", s.Namespace, s.Name)
			}
		}
		pl = newPlugin(args, idx)
		pl.snapshot = snapshot.NodeInfos()
		// The census, as the node handler fills it.
		for _, node := range nodes {
			pl.census.put(node)
		}
		// The first cycle judges every node, the second one's PreFilter folds the verdicts into
		// the memo's read table: the steady state.
		cycle()
		cycle()
		return pl
	})
	// Refuse to report a figure for state that is not there.
	if got := pl.verdicts.Len(); got != n {
		b.Fatalf("the memo holds %d node versions, want %d", got, n)
	}
	if got := len(pl.census.nodes); got != n {
		b.Fatalf("the census holds %d nodes, want %d", got, n)
	}
	for b.Loop() {
		cycle()
	}
	// After the loop: its first iteration resets the timer, which drops reported metrics.
	b.ReportMetric(float64(grown), "plugin-bytes")
	b.ReportMetric(float64(grown)/float64(n), "plugin-bytes/node")
	runtime.KeepAlive(nodes)
}
