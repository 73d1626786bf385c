package nodepoolready

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

const poolKey = "nodepool.banzaicloud.io/name"

func defaultArgs() *config.NodePoolReadyArgs {
	return configscheme.DefaultNodePoolReadyArgs()
}

func labelSet(namespace, name string, uid types.UID, generation int64, labels map[string]labelsv1alpha1.LabelValue) *labelsv1alpha1.NodePoolLabelSet {
	return &labelsv1alpha1.NodePoolLabelSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid, Generation: generation},
		Spec:       labelsv1alpha1.NodePoolLabelSetSpec{Labels: labels},
	}
}

// newTestPlugin builds the plugin around an index holding sets, without an informer.
func newTestPlugin(t testing.TB, args *config.NodePoolReadyArgs, sets ...*labelsv1alpha1.NodePoolLabelSet) *NodePoolReady {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	idx := newLabelSetIndex(args.LabelSetNamespaces)
	for _, s := range sets {
		idx.upsert(logger, s)
	}
	return newPlugin(args, idx)
}

func TestFilter(t *testing.T) {
	spot := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "spot"})
	pod := st.MakePod().Name("p").Namespace("default").Obj()
	dsPod := st.MakePod().Name("ds").Namespace("default").OwnerReference("ds", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()

	tests := []struct {
		name          string
		args          func(*config.NodePoolReadyArgs)
		sets          []*labelsv1alpha1.NodePoolLabelSet
		pod           *v1.Pod
		node          *v1.Node
		wantPreFilter *fwk.Status
		wantFilter    *fwk.Status
	}{
		{
			name: "ready node passes",
			sets: []*labelsv1alpha1.NodePoolLabelSet{spot},
			pod:  pod,
			node: st.MakeNode().Name("n").Label(poolKey, "spot").Label("example.com/lifecycle", "spot").Obj(),
		},
		{
			name:       "labels not applied",
			sets:       []*labelsv1alpha1.NodePoolLabelSet{spot},
			pod:        pod,
			node:       st.MakeNode().Name("n").Label(poolKey, "spot").Obj(),
			wantFilter: fwk.NewStatus(fwk.Pending, "node's pool labels are not applied yet").WithPlugin(Name),
		},
		{
			name:       "unknown pool with a set present",
			sets:       []*labelsv1alpha1.NodePoolLabelSet{spot},
			pod:        pod,
			node:       st.MakeNode().Name("n").Obj(),
			wantFilter: fwk.NewStatus(fwk.Pending, "node is not in a known pool").WithPlugin(Name),
		},
		{
			name: "unknown pool on a cluster without sets",
			pod:  pod,
			node: st.MakeNode().Name("n").Obj(),
		},
		{
			name: "required key",
			args: func(a *config.NodePoolReadyArgs) {
				a.RequiredLabelKeys = []string{"topology.pool-scheduler.io/update-domain"}
			},
			pod:        pod,
			node:       st.MakeNode().Name("n").Label(poolKey, "general").Obj(),
			wantFilter: fwk.NewStatus(fwk.Pending, "node is missing a required label").WithPlugin(Name),
		},
		{
			name:          "DaemonSet pods are exempt by default",
			sets:          []*labelsv1alpha1.NodePoolLabelSet{spot},
			pod:           dsPod,
			node:          st.MakeNode().Name("n").Label(poolKey, "spot").Obj(),
			wantPreFilter: fwk.NewStatus(fwk.Skip),
		},
		{
			name:       "DaemonSet pods are gated when configured",
			args:       func(a *config.NodePoolReadyArgs) { a.IgnoreDaemonSetPods = false },
			sets:       []*labelsv1alpha1.NodePoolLabelSet{spot},
			pod:        dsPod,
			node:       st.MakeNode().Name("n").Label(poolKey, "spot").Obj(),
			wantFilter: fwk.NewStatus(fwk.Pending, "node's pool labels are not applied yet").WithPlugin(Name),
		},
		{
			name:       "set in another namespace is ignored when a namespace is configured",
			args:       func(a *config.NodePoolReadyArgs) { a.LabelSetNamespaces = []string{"pool-scheduler"} },
			sets:       []*labelsv1alpha1.NodePoolLabelSet{spot},
			pod:        pod,
			node:       st.MakeNode().Name("n").Label(poolKey, "spot").Obj(),
			wantFilter: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			args := defaultArgs()
			if tt.args != nil {
				tt.args(args)
			}
			pl := newTestPlugin(t, args, tt.sets...)
			state := framework.NewCycleState()
			_, status := pl.PreFilter(ctx, state, tt.pod, nil)
			if diff := cmp.Diff(tt.wantPreFilter, status); diff != "" {
				t.Fatalf("PreFilter status (-want +got):\n%s", diff)
			}
			if status.IsSkip() {
				return
			}
			got := pl.Filter(ctx, state, tt.pod, plugintest.NodeInfo(tt.node))
			if diff := cmp.Diff(tt.wantFilter, got); diff != "" {
				t.Errorf("Filter status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterWithoutPreFilterStateIsAnError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	got := pl.Filter(ctx, framework.NewCycleState(), st.MakePod().Obj(), plugintest.NodeInfo(st.MakeNode().Name("n").Obj()))
	if got.Code() != fwk.Error {
		t.Errorf("Filter without PreFilter state = %v, want an Error status", got)
	}
}

func TestFilterCountsRejectionsByReason(t *testing.T) {
	registerMetrics()
	_, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs(), labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}))
	counter := rejections[pool.LabelsNotApplied]
	before, err := testutil.GetCounterMetricValue(counter)
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	pod := st.MakePod().Obj()
	pl.PreFilter(ctx, state, pod, nil)
	pl.Filter(ctx, state, pod, plugintest.NodeInfo(st.MakeNode().Name("n").Label(poolKey, "spot").Obj()))
	after, err := testutil.GetCounterMetricValue(counter)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 1 {
		t.Errorf("labels_not_applied rejections grew by %v, want 1", after-before)
	}
}

func TestPreFilterPinsTheIndexForTheCycle(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	state := framework.NewCycleState()
	pod := st.MakePod().Obj()
	pl.PreFilter(ctx, state, pod, nil)
	// A set arriving mid-cycle must not change verdicts within the cycle.
	pl.labelSets.upsert(logger, labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}))
	if got := pl.Filter(ctx, state, pod, plugintest.NodeInfo(st.MakeNode().Name("n").Label(poolKey, "spot").Obj())); got != nil {
		t.Errorf("Filter used the index updated mid-cycle: %v", got)
	}
}

// benchPlugin returns the plugin with ten pools' label sets and nodes nodes that mix every
// verdict, in the snapshot the plugin compacts its memo against.
func benchPlugin(b *testing.B, nodes int) (*NodePoolReady, []fwk.NodeInfo) {
	var sets []*labelsv1alpha1.NodePoolLabelSet
	for p := 0; p < 10; p++ {
		sets = append(sets, labelSet("ns", fmt.Sprintf("pool-%d", p), types.UID(fmt.Sprint(p)), 1, map[string]labelsv1alpha1.LabelValue{
			"example.com/lifecycle": "spot", "example.com/team": labelsv1alpha1.LabelValue(fmt.Sprint("team-", p)), "example.com/tier": "gold",
		}))
	}
	args := defaultArgs()
	args.RequiredLabelKeys = []string{"topology.pool-scheduler.io/update-domain"}
	pl := newTestPlugin(b, args, sets...)
	infos := make([]fwk.NodeInfo, nodes)
	objs := make([]*v1.Node, nodes)
	for i := range infos {
		p := i % 10
		n := st.MakeNode().Name(fmt.Sprint("node-", i)).Label(poolKey, fmt.Sprint("pool-", p)).
			Label("example.com/lifecycle", "spot").Label("example.com/team", fmt.Sprint("team-", p)).
			Label("example.com/tier", "gold").Label("topology.pool-scheduler.io/update-domain", fmt.Sprint(i%3)).
			Label("kubernetes.io/hostname", fmt.Sprint("node-", i)).Obj()
		n.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/lifecycle","example.com/team","example.com/tier"]`}
		switch i % 20 {
		case 1: // labels not applied
			delete(n.Labels, "example.com/tier")
		case 2: // stale
			n.Labels["example.com/old"] = "1"
			n.Annotations[pool.ManagedLabelsAnnotation] = `["example.com/lifecycle","example.com/team","example.com/tier","example.com/old"]`
		case 3: // unknown pool
			delete(n.Labels, poolKey)
		case 4, 5, 6, 7, 8: // in sync, annotation written by another labeler in another order
			n.Annotations[pool.ManagedLabelsAnnotation] = `["example.com/tier","example.com/team","example.com/lifecycle"]`
		}
		infos[i], objs[i] = plugintest.NodeInfo(n), n
	}
	pl.snapshot = cache.NewSnapshot(nil, objs).NodeInfos()
	return pl, infos
}

// BenchmarkFilter runs PreFilter once and Filter over every node per op, so allocs/op is the
// allocation count for all nodes: only the Status of each refused node (TestFilterDoesNotAllocate).
// Nodes mix every verdict. One sub-benchmark per cluster size (perNodeCounts): whether a node
// costs more in a larger cluster.
func BenchmarkFilter(b *testing.B) {
	for _, n := range perNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkFilter(b, n) })
	}
}

func benchmarkFilter(b *testing.B, nodes int) {
	pl, infos := benchPlugin(b, nodes)
	// Production verbosity: the -v=4 detail log is off, as it is in a real scheduler.
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	pod := st.MakePod().Name("p").Obj()
	state := framework.NewCycleState()
	// Steady state: each node version is judged once (the first cycle after it changes), then
	// served from the plugin's memo, which the next cycle's PreFilter compacts.
	pl.PreFilter(ctx, state, pod, nil)
	for _, ni := range infos {
		pl.Filter(ctx, state, pod, ni)
	}
	pl.PreFilter(ctx, state, pod, nil)
	b.ReportAllocs()
	for b.Loop() {
		for _, ni := range infos {
			pl.Filter(ctx, state, pod, ni)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/node")
}

// BenchmarkFilterAfterLabelSetChange is the cycle after a NodePoolLabelSet changed: every node
// is judged again (pl.verdicts misses), managed-labels annotations included. ns/node is the cost
// of judging a node; a node update costs the same for that node.
func BenchmarkFilterAfterLabelSetChange(b *testing.B) {
	pl, infos := benchPlugin(b, benchNodes)
	logger := klog.FromContext(context.Background())
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	pod := st.MakePod().Name("p").Obj()
	state := framework.NewCycleState()
	b.ReportAllocs()
	for b.Loop() {
		// A new compiled index with the same labels: the verdicts stay, every memo entry misses.
		pl.labelSets.mu.Lock()
		pl.labelSets.recompile(logger)
		pl.labelSets.mu.Unlock()
		pl.PreFilter(ctx, state, pod, nil)
		for _, ni := range infos {
			pl.Filter(ctx, state, pod, ni)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(infos)), "ns/node")
}

const benchNodes = 5000

// perNodeCounts are the cluster sizes BenchmarkFilter measures.
var perNodeCounts = []int{benchNodes, 15000}

func TestFilterDoesNotAllocate(t *testing.T) {
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(t, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	args := defaultArgs()
	args.RequiredLabelKeys = []string{"example.com/zone"}
	pl := newTestPlugin(t, args, labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}))
	stale := st.MakeNode().Name("stale").Label(poolKey, "spot").Label("example.com/a", "1").Label("example.com/old", "1").Label("example.com/zone", "1").Obj()
	stale.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/old","example.com/a"]`}
	nodes := []fwk.NodeInfo{
		plugintest.NodeInfo(st.MakeNode().Name("ready").Label(poolKey, "spot").Label("example.com/a", "1").Label("example.com/zone", "1").Obj()),
		plugintest.NodeInfo(st.MakeNode().Name("unlabelled").Label(poolKey, "spot").Obj()),
		plugintest.NodeInfo(st.MakeNode().Name("no-pool").Obj()),
		plugintest.NodeInfo(stale),
	}
	state := framework.NewCycleState()
	pod := st.MakePod().Obj()
	pl.PreFilter(ctx, state, pod, nil)
	// Accepting a node allocates nothing; refusing one allocates its Status (the framework
	// writes into it, so it cannot be shared), as upstream plugins do.
	for _, ni := range nodes {
		rejected := !pl.Filter(ctx, state, pod, ni).IsSuccess()
		n := testing.AllocsPerRun(50, func() { pl.Filter(ctx, state, pod, ni) })
		if max := map[bool]float64{false: 0, true: 2}[rejected]; n > max {
			t.Errorf("Filter(%s, rejected=%v) allocates %v times, want at most %v", ni.Node().Name, rejected, n, max)
		}
	}
}

// TestPreFilterWaitsForTheNodeHandler: until the plugin's node handler has seen every node, the
// pools labelled from sets out of view are not all known, so pods are put off (and remembered,
// for the activation once it has).
func TestPreFilterWaitsForTheNodeHandler(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	synced := false
	pl.census.hasSynced = func() bool { return synced }
	pod := st.MakePod().Name("p").Namespace("default").Obj()
	_, got := pl.PreFilter(ctx, framework.NewCycleState(), pod, nil)
	if diff := cmp.Diff(fwk.NewStatus(fwk.Pending, waitingForNodes).WithPlugin(Name), got); diff != "" {
		t.Errorf("before the handler synced (-want +got):\n%s", diff)
	}
	if waiting := pl.waiting.takeAll(); len(waiting) != 1 {
		t.Errorf("pods remembered for the activation: %d, want 1", len(waiting))
	}
	synced = true
	if _, got := pl.PreFilter(ctx, framework.NewCycleState(), pod, nil); !got.IsSuccess() {
		t.Errorf("after the handler synced: %v", got)
	}
}
