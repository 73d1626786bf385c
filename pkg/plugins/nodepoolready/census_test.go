package nodepoolready

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

var (
	spotSet   = labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "spot"})
	readyNode = st.MakeNode().Name("n1").Label(poolKey, "spot").Label("example.com/lifecycle", "spot").Obj()
	// The same node before the labeler applied its pool's labels.
	joiningNode = st.MakeNode().Name("n1").Label(poolKey, "spot").Obj()
	otherNode   = st.MakeNode().Name("n2").Label(poolKey, "spot").Label("example.com/lifecycle", "spot").Obj()
)

// syncedPlugin returns a plugin whose census has seen nodes, as its node handler would have once
// synced.
func syncedPlugin(t *testing.T, nodes ...*v1.Node) *NodePoolReady {
	t.Helper()
	pl := newTestPlugin(t, defaultArgs(), spotSet)
	pl.census.hasSynced = func() bool { return true }
	pl.census.list = func() ([]*v1.Node, error) { return nodes, nil }
	for _, n := range nodes {
		pl.census.put(n)
	}
	return pl
}

// TestCensus replays node events and label-set changes and checks the unready count and whether
// Filter may be skipped against a snapshot holding the same nodes.
func TestCensus(t *testing.T) {
	type step struct {
		put    *v1.Node
		remove string
		// labels replaces the spot pool's desired labels (a NodePoolLabelSet update).
		labels map[string]labelsv1alpha1.LabelValue
	}
	tests := []struct {
		name        string
		notSynced   bool
		steps       []step
		wantUnready int64
		wantSkip    bool
	}{
		{name: "no node seen yet", wantSkip: false},
		{name: "every node ready", steps: []step{{put: readyNode}, {put: otherNode}}, wantSkip: true},
		{name: "handler not synced", notSynced: true, steps: []step{{put: readyNode}}, wantSkip: false},
		{name: "a node waits for labels", steps: []step{{put: joiningNode}, {put: otherNode}}, wantUnready: 1},
		{name: "labels land", steps: []step{{put: joiningNode}, {put: otherNode}, {put: readyNode}}, wantSkip: true},
		{name: "unready node deleted", steps: []step{{put: joiningNode}, {put: otherNode}, {remove: "n1"}}, wantSkip: true},
		{name: "deleting an unknown node changes nothing", steps: []step{{put: readyNode}, {remove: "gone"}}, wantSkip: true},
		{name: "label set changes: every node judged again",
			steps:       []step{{put: readyNode}, {put: otherNode}, {labels: map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "on-demand"}}},
			wantUnready: 2},
		{name: "label set changes back",
			steps: []step{{put: readyNode}, {labels: map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "on-demand"}},
				{labels: map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "spot"}}},
			wantSkip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			pl := syncedPlugin(t)
			if tt.notSynced {
				pl.census.hasSynced = func() bool { return false }
			}
			// The informer's store: what a recount lists.
			nodes := map[string]*v1.Node{}
			pl.census.list = func() ([]*v1.Node, error) {
				var out []*v1.Node
				for _, n := range nodes {
					out = append(out, n)
				}
				return out, nil
			}
			for i, s := range tt.steps {
				switch {
				case s.put != nil:
					nodes[s.put.Name] = s.put
					pl.census.put(s.put)
				case s.remove != "":
					delete(nodes, s.remove)
					pl.census.remove(s.remove)
				default:
					set := labelSet("ns", "spot", "u1", int64(i+2), s.labels)
					if pl.labelSets.upsert(logger, set) {
						pl.census.recount()
					}
				}
			}
			var objs []*v1.Node
			for _, n := range nodes {
				objs = append(objs, n)
			}
			snapshot := cache.NewSnapshot(nil, objs).NodeInfos()
			if got := pl.census.unreadyCount.Load(); got != tt.wantUnready {
				t.Errorf("unready nodes = %d, want %d", got, tt.wantUnready)
			}
			if got := pl.census.allReady(pl.labelSets.current(), snapshot); got != tt.wantSkip {
				t.Errorf("allReady = %v, want %v", got, tt.wantSkip)
			}
			// A cycle that pinned other label sets never skips.
			if pl.census.allReady(pool.EmptyLabelSets, snapshot) && pl.labelSets.current() != pool.EmptyLabelSets {
				t.Error("allReady for label sets the census did not judge")
			}
		})
	}
}

// TestSkippedFilterIsMadeGoodInReserve: the census has judged a node ready, but the cycle's
// snapshot holds a newer version whose labels are gone (or the census lags behind a join).
// PreFilter skips Filter; Reserve refuses the chosen node, retries the pod, and the following
// cycles run Filter until the snapshot no longer holds that version.
func TestSkippedFilterIsMadeGoodInReserve(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := syncedPlugin(t, readyNode, otherNode)
	h := &plugintest.Activator{}
	pl.handle = h
	pod := st.MakePod().Namespace("default").Name("p").Obj()
	registerMetrics()

	// The snapshot has the joining version of n1; the census still has the ready one.
	pl.snapshot = cache.NewSnapshot(nil, []*v1.Node{joiningNode, otherNode}).NodeInfos()
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, nil); !status.IsSkip() {
		t.Fatalf("PreFilter = %v, want Skip: the census finds every node ready", status)
	}
	// A node Filter would have passed is reserved without a look.
	if status := pl.Reserve(ctx, state, pod, "n2"); status != nil {
		t.Errorf("Reserve on a ready node = %v, want success", status)
	}
	want := fwk.NewStatus(fwk.Pending, pool.LabelsNotApplied.String()).WithPlugin(Name)
	if diff := cmp.Diff(want, pl.Reserve(ctx, state, pod, "n1")); diff != "" {
		t.Errorf("Reserve on the joining node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/p"}, h.Take()); diff != "" {
		t.Errorf("activated pods (-want +got):\n%s", diff)
	}

	// While the snapshot holds the suspect version, Filter runs and refuses it.
	state = framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, nil); status != nil {
		t.Fatalf("PreFilter with a suspect in the snapshot = %v, want success (Filter runs)", status)
	}
	ni, _ := pl.snapshot.Get("n1")
	if got := pl.Filter(ctx, state, pod, ni); got.Code() != fwk.Pending {
		t.Errorf("Filter on the suspect = %v, want Pending", got)
	}
	if status := pl.Reserve(ctx, state, pod, "n2"); status != nil {
		t.Errorf("Reserve after Filter ran = %v, want success (Filter judged the node)", status)
	}

	// The labels land: the snapshot moves on and the cycles skip Filter again.
	pl.snapshot = cache.NewSnapshot(nil, []*v1.Node{readyNode, otherNode}).NodeInfos()
	state = framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, nil); !status.IsSkip() {
		t.Errorf("PreFilter after the snapshot moved on = %v, want Skip", status)
	}
	if status := pl.Reserve(ctx, state, pod, "n1"); status != nil {
		t.Errorf("Reserve on the ready node = %v, want success", status)
	}
	if n := pl.census.suspectCount.Load(); n != 0 {
		t.Errorf("suspects left: %d", n)
	}
}

// TestExemptPodsAreNotJudgedInReserve: DaemonSet pods skip the gate at PreFilter; Reserve must not
// judge their node either.
func TestExemptPodsAreNotJudgedInReserve(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := syncedPlugin(t, readyNode)
	pl.snapshot = cache.NewSnapshot(nil, []*v1.Node{joiningNode}).NodeInfos()
	ds := st.MakePod().Name("ds").Namespace("default").OwnerReference("ds", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, ds, nil); !status.IsSkip() {
		t.Fatalf("PreFilter for a DaemonSet pod = %v, want Skip", status)
	}
	if status := pl.Reserve(ctx, state, ds, "n1"); status != nil {
		t.Errorf("Reserve for a DaemonSet pod = %v, want success", status)
	}
}

// TestCloseStopsWatchingNodes: the census follows the scheduler's node informer until the
// framework closes the plugin, and not after (a stopped profile must not keep judging nodes).
func TestCloseStopsWatchingNodes(t *testing.T) {
	logger, tCtx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tCtx)
	client := fake.NewClientset()
	// The fake's watch does not replay: a node created after the informer's list and before its
	// watch is registered is never seen. So nodes are created only once the watch is registered.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("nodes", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	pl := newTestPlugin(t, defaultArgs(), spotSet)
	if err := pl.watchNodes(logger, factory); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	select {
	case <-watching:
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the node informer never watched")
	}
	// Shutdown waits for the informers, which stop only once ctx is cancelled.
	defer func() { cancel(); factory.Shutdown() }()
	lister := factory.Core().V1().Nodes().Lister()
	addNode := func(node *v1.Node) {
		t.Helper()
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Wait until the informer's store holds it: its handlers have been called by then
		// (the shared informer updates the store, then distributes the event).
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			_, err := lister.Get(node.Name)
			return err == nil, nil
		}); err != nil {
			t.Fatalf("node %s never reached the informer: %v", node.Name, err)
		}
	}

	addNode(joiningNode)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return pl.census.unreadyCount.Load() == 1, nil
	}); err != nil {
		t.Fatalf("census never counted the joining node: unready = %d", pl.census.unreadyCount.Load())
	}
	if err := pl.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	addNode(st.MakeNode().Name("n3").Label(poolKey, "spot").Obj())
	// n3 is in the store; a still-registered handler runs within milliseconds of that, so watch
	// the census for a while rather than once.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		pl.census.mu.Lock()
		_, seen := pl.census.nodes["n3"]
		pl.census.mu.Unlock()
		return seen || pl.census.unreadyCount.Load() != 1, nil
	})
	if err == nil {
		t.Errorf("census saw n3 after Close: unready = %d, want 1", pl.census.unreadyCount.Load())
	}
}
