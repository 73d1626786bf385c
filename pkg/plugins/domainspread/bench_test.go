package domainspread

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

const (
	benchPods = 10000
	benchSets = 2000 // 5 replicas each
)

// benchCluster is nodes nodes over 2 fault domains x 3 update domains and 10 000 pods of 2000
// ReplicaSets; the pod to place belongs to set 0.
func benchCluster(numNodes int) ([]*v1.Pod, []*v1.Node, *v1.Pod) {
	nodes := make([]*v1.Node, numNodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		nodes[i] = st.MakeNode().Name(name).Label(v1.LabelHostname, name).
			Label(zoneKey, fmt.Sprint(i%2)).Label(udKey, fmt.Sprint(i/2%3)).Obj()
	}
	pods := make([]*v1.Pod, benchPods)
	for i := range pods {
		set := i % benchSets
		pods[i] = rsPod(fmt.Sprintf("p-%d", i), fmt.Sprintf("rs-%d", set), nodes[(i*7919)%numNodes].Name)
		pods[i].Labels = map[string]string{"set": fmt.Sprint(set)}
	}
	pod := rsPod("incoming", "rs-0", "")
	pod.Labels = map[string]string{"set": "0"}
	return pods, nodes, pod
}

// withConstraints is what a user writes to get the same spread from PodTopologySpread.
func withConstraints(pod *v1.Pod, when v1.UnsatisfiableConstraintAction) *v1.Pod {
	p := pod.DeepCopy()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"set": "0"}}
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: when, LabelSelector: sel},
		{MaxSkew: 1, TopologyKey: udKey, WhenUnsatisfiable: when, LabelSelector: sel},
	}
	return p
}

type scorer interface {
	framework.PreScorePlugin
	framework.ScorePlugin
}

type filterer interface {
	framework.PreFilterPlugin
	framework.FilterPlugin
}

// benchContext is a quiet context for benchmarks, cancelled at cleanup.
func benchContext(tb testing.TB) context.Context {
	// The replica index's informer logs through the global klog, which ktesting sets to -v=5 for
	// tests; its lines would land in the benchmark output.
	ktesting.SetDefaultVerbosity(0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klogtesting.NewLogger(tb, klogtesting.NewConfig(klogtesting.Verbosity(2)))))
	tb.Cleanup(cancel)
	return ctx
}

func benchPlugins(b testing.TB, mode config.SpreadMode, pods []*v1.Pod, nodes []*v1.Node) (context.Context, *DomainSpread, framework.Plugin, []fwk.NodeInfo) {
	b.Helper()
	ctx := benchContext(b)
	snapshot := cache.NewSnapshot(pods, nodes)
	args := defaultArgs()
	args.Mode = mode
	// Fault and update domain, like the two constraints PodTopologySpread gets.
	args.Dimensions = args.Dimensions[:2]
	ds := newPlugin(b, ctx, args, pods, snapshot)
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		b.Fatal(err)
	}
	pts, err := frameworkruntime.FactoryAdapter(feature.Features{}, podtopologyspread.New)(ctx,
		&schedconfig.PodTopologySpreadArgs{DefaultingType: schedconfig.ListDefaulting}, fh)
	if err != nil {
		b.Fatal(err)
	}
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	return ctx, ds, pts, infos
}

// BenchmarkScoreCycle times one scoring cycle (PreScore, Score on every node, NormalizeScore)
// of DomainSpread and of PodTopologySpread with two ScheduleAnyway constraints on the same keys,
// in the same run, and reports the ratio, per cluster size (perNodeCounts).
func BenchmarkScoreCycle(b *testing.B) {
	for _, n := range perNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkScoreCycle(b, n) })
	}
}

func benchmarkScoreCycle(b *testing.B, numNodes int) {
	pods, nodes, pod := benchCluster(numNodes)
	ctx, ds, pts, infos := benchPlugins(b, config.SpreadSoft, pods, nodes)
	ptsPod := withConstraints(pod, v1.ScheduleAnyway)
	cycle := func(pl scorer, ext framework.ScoreExtensions, p *v1.Pod) time.Duration {
		start := time.Now()
		state := framework.NewCycleState()
		if s := pl.PreScore(ctx, state, p, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		list := make(framework.NodeScoreList, len(infos))
		for i, ni := range infos {
			score, s := pl.Score(ctx, state, p, ni)
			if !s.IsSuccess() {
				b.Fatal(s)
			}
			list[i] = framework.NodeScore{Name: ni.Node().Name, Score: score}
		}
		if s := ext.NormalizeScore(ctx, state, p, list); !s.IsSuccess() {
			b.Fatal(s)
		}
		return time.Since(start)
	}
	ptsScorer := pts.(scorer)
	var dsTotal, ptsTotal time.Duration
	b.ReportAllocs()
	for b.Loop() {
		dsTotal += cycle(ds, ds, pod)
		ptsTotal += cycle(ptsScorer, ptsScorer.ScoreExtensions(), ptsPod)
	}
	n := float64(b.N)
	b.ReportMetric(float64(dsTotal.Nanoseconds())/n, "domainspread-ns/cycle")
	b.ReportMetric(float64(ptsTotal.Nanoseconds())/n, "podtopologyspread-ns/cycle")
	b.ReportMetric(float64(dsTotal)/float64(ptsTotal), "domainspread/podtopologyspread")
}

// BenchmarkFilterCycle does the same for Hard mode against DoNotSchedule constraints:
// PreFilter, then Filter on every node.
func BenchmarkFilterCycle(b *testing.B) {
	for _, n := range perNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkFilterCycle(b, n) })
	}
}

func benchmarkFilterCycle(b *testing.B, numNodes int) {
	pods, nodes, pod := benchCluster(numNodes)
	ctx, ds, pts, infos := benchPlugins(b, config.SpreadHard, pods, nodes)
	ptsPod := withConstraints(pod, v1.DoNotSchedule)
	cycle := func(pl filterer, p *v1.Pod) time.Duration {
		start := time.Now()
		state := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, state, p, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		for _, ni := range infos {
			pl.Filter(ctx, state, p, ni)
		}
		return time.Since(start)
	}
	var dsTotal, ptsTotal time.Duration
	b.ReportAllocs()
	for b.Loop() {
		dsTotal += cycle(ds, pod)
		ptsTotal += cycle(pts.(filterer), ptsPod)
	}
	n := float64(b.N)
	b.ReportMetric(float64(dsTotal.Nanoseconds())/n, "domainspread-ns/cycle")
	b.ReportMetric(float64(ptsTotal.Nanoseconds())/n, "podtopologyspread-ns/cycle")
	b.ReportMetric(float64(dsTotal)/float64(ptsTotal), "domainspread/podtopologyspread")
}

// perNodeCounts are the cluster sizes of the cycle and per-node benchmarks: whether a node's
// Filter or Score costs more in a larger cluster (the memo's table no longer in cache, say).
var perNodeCounts = []int{5000, 15000}

// BenchmarkPerNode measures Filter and Score alone over every node (state computed once), per
// cluster size: allocs/op must be 0 for Score; Filter allocates the Status of each refused node.
func BenchmarkPerNode(b *testing.B) {
	for _, n := range perNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkPerNode(b, n) })
	}
}

func benchmarkPerNode(b *testing.B, numNodes int) {
	pods, nodes, pod := benchCluster(numNodes)
	ctx, ds, _, infos := benchPlugins(b, config.SpreadHard, pods, nodes)
	state := steadyState(b, ctx, ds, pod, infos)
	b.Run("Filter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ni := range infos {
				ds.Filter(ctx, state, pod, ni)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(infos)), "ns/node")
	})
	b.Run("Score", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ni := range infos {
				ds.Score(ctx, state, pod, ni)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(infos)), "ns/node")
	})
}

// BenchmarkPreScore times PreScore alone, per cluster size, with the default dimensions (zone,
// update domain, host: cell layering) in Soft mode, on every node, in the steady state. It runs
// on the scheduling goroutine, so its time lengthens every cycle; outside pool upgrades it reads
// the workload's replicas, not the nodes scored.
func BenchmarkPreScore(b *testing.B) {
	for _, n := range perNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			pods, nodes, pod := benchCluster(n)
			ctx := benchContext(b)
			snapshot := cache.NewSnapshot(pods, nodes)
			ds := newPlugin(b, ctx, defaultArgs(), pods, snapshot)
			if !ds.layered() {
				b.Fatal("the default dimensions no longer layer cells: this benchmark measures nothing it names")
			}
			infos, err := snapshot.NodeInfos().List()
			if err != nil {
				b.Fatal(err)
			}
			// Two cycles: the first resolves every node's domains, the second compacts them into
			// the memo's read table.
			for range 2 {
				state := framework.NewCycleState()
				if s := ds.PreScore(ctx, state, pod, infos); !s.IsSuccess() {
					b.Fatal(s)
				}
				for _, ni := range infos {
					ds.Score(ctx, state, pod, ni)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if s := ds.PreScore(ctx, framework.NewCycleState(), pod, infos); !s.IsSuccess() {
					b.Fatal(s)
				}
			}
		})
	}
}

// steadyState runs two cycles (the first resolves every node's domains, the second's PreFilter
// compacts them into the memo's read table) and returns a third cycle's state after PreFilter and
// PreScore: what Filter and Score see once a cluster has been scheduled on.
func steadyState(tb testing.TB, ctx context.Context, ds *DomainSpread, pod *v1.Pod, infos []fwk.NodeInfo) fwk.CycleState {
	tb.Helper()
	for range 2 {
		state := framework.NewCycleState()
		if _, s := ds.PreFilter(ctx, state, pod, infos); !s.IsSuccess() {
			tb.Fatal(s)
		}
		for _, ni := range infos {
			ds.Filter(ctx, state, pod, ni)
		}
	}
	state := framework.NewCycleState()
	if _, s := ds.PreFilter(ctx, state, pod, infos); !s.IsSuccess() {
		tb.Fatal(s)
	}
	if s := ds.PreScore(ctx, state, pod, infos); !s.IsSuccess() {
		tb.Fatal(s)
	}
	return state
}

// TestFilterAndScoreDoNotAllocate: once a node's domains are memoised (the steady state),
// scoring a node allocates nothing, nor does accepting one; refusing a node allocates its Status
// (the framework writes into it, so it cannot be shared), as in the other plugins.
func TestFilterAndScoreDoNotAllocate(t *testing.T) {
	nodes := make([]*v1.Node, 12)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		nodes[i] = st.MakeNode().Name(name).Label(v1.LabelHostname, name).
			Label(zoneKey, fmt.Sprint(i%2)).Label(udKey, fmt.Sprint(i/2%3)).Obj()
	}
	// Three replicas in zone 0, update domain 0: Hard mode refuses that domain's nodes.
	pods := []*v1.Pod{rsPod("r0", "rs-a", "node-0"), rsPod("r1", "rs-a", "node-6"), rsPod("r2", "rs-a", "node-0")}
	pod := rsPod("incoming", "rs-a", "")
	ctx, ds, _, infos := benchPlugins(t, config.SpreadHard, pods, nodes)
	state := steadyState(t, ctx, ds, pod, infos)
	var accepted, refused int
	for _, ni := range infos {
		rejected := !ds.Filter(ctx, state, pod, ni).IsSuccess()
		if rejected {
			refused++
		} else {
			accepted++
		}
		if n := testing.AllocsPerRun(50, func() { ds.Filter(ctx, state, pod, ni) }); n > map[bool]float64{false: 0, true: 2}[rejected] {
			t.Errorf("Filter(%s, rejected=%v) allocates %v times per call", ni.Node().Name, rejected, n)
		}
		if n := testing.AllocsPerRun(50, func() { ds.Score(ctx, state, pod, ni) }); n != 0 {
			t.Errorf("Score(%s) allocates %v times per call, want 0", ni.Node().Name, n)
		}
	}
	// Both paths were measured.
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d nodes, refused %d: the cluster no longer exercises both", accepted, refused)
	}
}

// TestSoftScoreDoesNotAllocate: with the default dimensions (Soft mode, cell layering), once the
// nodes' domains are memoised, scoring a node allocates nothing, whether the workload's replicas
// sit in the few fixed slots or, past fewDomains hosts, in a slice by ID.
func TestSoftScoreDoesNotAllocate(t *testing.T) {
	for _, replicas := range []int{3, fewDomains + 4} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			var nodes []*v1.Node
			for i := range 24 {
				nodes = append(nodes, node(fmt.Sprintf("n%d", i), fmt.Sprint(i%3), fmt.Sprint(i/3%2)))
			}
			var pods []*v1.Pod
			for i := range replicas {
				pods = append(pods, rsPod(fmt.Sprint("r", i), "rs-a", nodes[i*2%len(nodes)].Name))
			}
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, ctx, defaultArgs(), pods, nodes)
			pod := rsPod("incoming", "rs-a", "")
			infos := nodeInfosOf(t, pl, nodes)
			for range 2 {
				rawScores(t, ctx, pl, pod, infos)
			}
			state, s := preScored(t, ctx, pl, pod, infos)
			if !s.layered || (s.perDomain[2] != nil) != (replicas > fewDomains) {
				t.Fatalf("state: layered %v, hosts in a slice %v; want layered and a slice only past %d hosts", s.layered, s.perDomain[2] != nil, fewDomains)
			}
			for _, ni := range infos {
				if n := testing.AllocsPerRun(50, func() { pl.Score(ctx, state, pod, ni) }); n != 0 {
					t.Errorf("Score(%s) allocates %v times per call, want 0", ni.Node().Name, n)
				}
			}
		})
	}
}
