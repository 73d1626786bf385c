package nodepoolaffinity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/internal/compat/schedcache"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const (
	agentPool = "kubernetes.azure.com/agentpool"
	gkePool   = "cloud.google.com/gke-nodepool"
)

// newTestPlugin builds the plugin with its default args on the scheduler's own snapshot.
func newTestPlugin(t *testing.T, ctx context.Context, snapshot *cache.Snapshot) *NodePoolAffinity {
	t.Helper()
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(ctx, configscheme.DefaultNodePoolAffinityArgs(), fh)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*NodePoolAffinity)
}

func preFilter(t *testing.T, ctx context.Context, pl *NodePoolAffinity, pod *v1.Pod) (sets.Set[string], bool) {
	t.Helper()
	r, status := pl.PreFilter(ctx, framework.NewCycleState(), pod, nil)
	if status.IsSkip() {
		return nil, false
	}
	if !status.IsSuccess() {
		t.Fatalf("PreFilter: %v", status)
	}
	return r.NodeNames, true
}

func TestPreFilter(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("a-0").Label(agentPool, "a").Obj(),
		st.MakeNode().Name("a-1").Label(agentPool, "a").Obj(),
		st.MakeNode().Name("b-0").Label(agentPool, "b").Obj(),
		st.MakeNode().Name("c-0").Label(agentPool, "c").Label(gkePool, "g").Obj(),
		st.MakeNode().Name("none").Obj(),
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want []string // nil: Skip (no narrowing)
	}{
		{name: "not pinned", pod: st.MakePod().Name("p").Obj()},
		{name: "nodeSelector on a pool key", pod: st.MakePod().Name("p").NodeSelector(map[string]string{agentPool: "a"}).Obj(), want: []string{"a-0", "a-1"}},
		{name: "nodeSelector on another key", pod: st.MakePod().Name("p").NodeSelector(map[string]string{"example.com/x": "a"}).Obj()},
		{name: "required In on a pool key, two pools", pod: st.MakePod().Name("p").NodeAffinityIn(agentPool, []string{"a", "b"}, st.NodeSelectorTypeMatchExpressions).Obj(),
			want: []string{"a-0", "a-1", "b-0"}},
		{name: "NotIn narrows nothing", pod: st.MakePod().Name("p").NodeAffinityNotIn(agentPool, []string{"a"}).Obj()},
		{name: "two terms, one unpinned: nothing", pod: func() *v1.Pod {
			p := st.MakePod().Name("p").NodeAffinityIn(agentPool, []string{"b"}, st.NodeSelectorTypeMatchExpressions).Obj()
			terms := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			*terms = append(*terms, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "example.com/x", Operator: v1.NodeSelectorOpExists}}})
			return p
		}()},
		{name: "two terms on two pool keys: their union", pod: func() *v1.Pod {
			p := st.MakePod().Name("p").NodeAffinityIn(agentPool, []string{"b"}, st.NodeSelectorTypeMatchExpressions).Obj()
			terms := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			*terms = append(*terms, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: gkePool, Operator: v1.NodeSelectorOpIn, Values: []string{"g"}}}})
			return p
		}(), want: []string{"b-0", "c-0"}},
		{name: "selector and affinity: the smaller", pod: st.MakePod().Name("p").NodeSelector(map[string]string{agentPool: "a"}).
			NodeAffinityIn(agentPool, []string{"b"}, st.NodeSelectorTypeMatchExpressions).Obj(), want: []string{"b-0"}},
		{name: "a pool with no node: not narrowed, NodeAffinity explains", pod: st.MakePod().Name("p").NodeSelector(map[string]string{agentPool: "gone"}).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, ctx, cache.NewSnapshot(nil, nodes))
			got, narrowed := preFilter(t, ctx, pl, tt.pod)
			if !narrowed {
				if tt.want != nil {
					t.Fatalf("skipped, want %v", tt.want)
				}
				return
			}
			if diff := cmp.Diff(tt.want, sets.List(got)); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNeverDropsAFeasibleNode: on random clusters, kept by kube-scheduler's own cache and
// snapshot through node additions, relabellings and removals, every node the in-tree
// NodeAffinity accepts for a random pod (component-helpers' RequiredNodeAffinity, which its
// Filter calls) is in the plugin's result; and the result narrows the search for most pinned pods.
func TestNeverDropsAFeasibleNode(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	rng := rand.New(rand.NewPCG(1, 2))
	schedCache := schedcache.New(ctx)
	snapshot := cache.NewEmptySnapshot()
	pl := newTestPlugin(t, ctx, snapshot)
	values := []string{"a", "b", "c", "d", "e"}
	keys := []string{agentPool, gkePool, "example.com/other"}
	randomLabels := func() map[string]string {
		l := map[string]string{}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				l[k] = values[rng.IntN(len(values))]
			}
		}
		return l
	}
	randomRequirement := func() v1.NodeSelectorRequirement {
		ops := []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist}
		r := v1.NodeSelectorRequirement{Key: keys[rng.IntN(len(keys))], Operator: ops[rng.IntN(len(ops))]}
		if r.Operator == v1.NodeSelectorOpIn || r.Operator == v1.NodeSelectorOpNotIn {
			for range 1 + rng.IntN(2) {
				r.Values = append(r.Values, values[rng.IntN(len(values))])
			}
		}
		return r
	}
	randomPod := func(i int) *v1.Pod {
		p := st.MakePod().Name(fmt.Sprintf("p%d", i)).Obj()
		if rng.IntN(2) == 0 {
			p.Spec.NodeSelector = map[string]string{}
			for range 1 + rng.IntN(2) {
				p.Spec.NodeSelector[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
			}
		}
		if rng.IntN(2) == 0 {
			var terms []v1.NodeSelectorTerm
			for range 1 + rng.IntN(3) {
				var term v1.NodeSelectorTerm
				for range 1 + rng.IntN(3) {
					term.MatchExpressions = append(term.MatchExpressions, randomRequirement())
				}
				terms = append(terms, term)
			}
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
		}
		return p
	}

	current := map[string]*v1.Node{}
	next := 0
	var pinned, narrowed int
	for round := range 200 {
		// Change the cluster: add, relabel or remove a few nodes, as the scheduler's event
		// handlers would, and take the snapshot as a scheduling cycle does.
		for range 1 + rng.IntN(5) {
			switch op := rng.IntN(4); {
			case op <= 1 || len(current) < 5:
				n := st.MakeNode().Name(fmt.Sprintf("n%d", next)).Obj()
				n.Labels = randomLabels()
				next++
				schedCache.AddNode(logger, n)
				current[n.Name] = n
			case op == 2:
				for _, old := range current {
					n := old.DeepCopy()
					n.Labels = randomLabels()
					schedCache.UpdateNode(logger, old, n)
					current[n.Name] = n
					break
				}
			default:
				for _, old := range current {
					if err := schedCache.RemoveNode(logger, old); err != nil {
						t.Fatal(err)
					}
					delete(current, old.Name)
					break
				}
			}
		}
		if err := schedCache.UpdateSnapshot(logger, snapshot); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			pod := randomPod(round*20 + i)
			got, ok := preFilter(t, ctx, pl, pod)
			required := nodeaffinity.GetRequiredNodeAffinity(pod)
			if pool.PinsOf(pod, pl.keys).Empty() {
				if ok {
					t.Fatalf("round %d: pod %s is pinned to no pool, yet narrowed to %v", round, pod.Name, sets.List(got))
				}
				continue
			}
			pinned++
			if !ok {
				continue
			}
			narrowed++
			for _, n := range current {
				match, err := required.Match(n)
				if err != nil {
					t.Fatal(err)
				}
				if match && !got.Has(n.Name) {
					t.Fatalf("round %d: NodeAffinity accepts %s (labels %v) for pod %s (selector %v, affinity %v), but the plugin's result %v drops it",
						round, n.Name, n.Labels, pod.Name, pod.Spec.NodeSelector, pod.Spec.Affinity, sets.List(got))
				}
			}
			for name := range got {
				if _, exists := current[name]; !exists {
					t.Fatalf("round %d: result names %s, which is gone", round, name)
				}
			}
		}
	}
	if narrowed < pinned/2 {
		t.Errorf("narrowed %d of %d pinned pods: the test would pass with a plugin that never narrows", narrowed, pinned)
	}
	t.Logf("narrowed the search for %d of %d pool-pinned pods", narrowed, pinned)
}

func TestQueueingHint(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, ctx, cache.NewSnapshot(nil, nil))
	pinned := st.MakePod().Name("p").NodeSelector(map[string]string{agentPool: "a"}).Obj()
	inA := st.MakeNode().Name("n").Label(agentPool, "a").Obj()
	inB := st.MakeNode().Name("n").Label(agentPool, "b").Obj()
	tests := []struct {
		name     string
		pod      *v1.Pod
		old, new *v1.Node
		want     fwk.QueueingHint
	}{
		{name: "a node of the pod's pool added", pod: pinned, new: inA, want: fwk.Queue},
		{name: "a node of another pool added", pod: pinned, new: inB, want: fwk.QueueSkip},
		{name: "a node relabelled into the pod's pool", pod: pinned, old: inB, new: inA, want: fwk.Queue},
		{name: "a node of the pod's pool relabelled otherwise", pod: pinned, old: inA, new: inA, want: fwk.QueueSkip},
		{name: "an unpinned pod: every node is in its search", pod: st.MakePod().Name("q").Obj(), new: inA, want: fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old any
			if tt.old != nil {
				old = tt.old
			}
			got, err := pl.isSchedulableAfterNodeChange(klog.FromContext(ctx), tt.pod, old, tt.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}
