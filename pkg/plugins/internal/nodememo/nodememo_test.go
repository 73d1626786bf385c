package nodememo

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
)

// snapshotOf serves Get for Memo.Compact from a list of current nodes.
type snapshotOf map[string]*v1.Node

func (s snapshotOf) Get(name string) (fwk.NodeInfo, error) {
	n, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("node %q not found", name)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return ni, nil
}

func TestMemo(t *testing.T) {
	calls := map[string]int{}
	memo := New(func(n *v1.Node, suffix string) string {
		calls[n.Name]++
		return n.Labels["pool"] + suffix
	})
	a1 := st.MakeNode().Name("a").Label("pool", "x").Obj()
	b := st.MakeNode().Name("b").Label("pool", "y").Obj()

	got := []string{memo.Get(a1, ""), memo.Get(a1, ""), memo.Get(b, ""), memo.Get(a1, "!")}
	if diff := cmp.Diff([]string{"x", "x", "y", "x!"}, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	// a1 computed for "" and again for "!": a new input is a miss.
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 1}, calls); diff != "" {
		t.Errorf("compute calls (-want +got):\n%s", diff)
	}

	// An update replaces the node object: the new version is computed, not served from a1.
	a2 := a1.DeepCopy()
	a2.Labels["pool"] = "z"
	if got := memo.Get(a2, "!"); got != "z!" {
		t.Errorf("updated node: got %q, want %q", got, "z!")
	}
	if memo.Len() != 3 {
		t.Errorf("Len = %d, want 3 (a1, a2, b)", memo.Len())
	}
}

func TestMemoCompact(t *testing.T) {
	calls := 0
	memo := New(func(n *v1.Node, _ struct{}) string { calls++; return n.Name })
	current := snapshotOf{}
	// 100 nodes, each seen in three versions; then 50 of them are deleted.
	for i := 0; i < 100; i++ {
		n := st.MakeNode().Name(fmt.Sprintf("n%d", i)).Obj()
		for v := 0; v < 3; v++ {
			n = n.DeepCopy()
			memo.Get(n, struct{}{})
		}
		current[n.Name] = n
	}
	for i := 50; i < 100; i++ {
		delete(current, fmt.Sprintf("n%d", i))
	}
	if memo.Len() != 300 {
		t.Fatalf("Len before Compact = %d, want 300", memo.Len())
	}
	memo.Compact(current)
	if memo.Len() != 50 {
		t.Fatalf("Len after Compact = %d, want 50 (the current versions of the remaining nodes)", memo.Len())
	}
	calls = 0
	for _, n := range current {
		memo.Get(n, struct{}{})
	}
	if calls != 0 {
		t.Errorf("Compact dropped %d current versions", calls)
	}

	// A trickle of changes (fewer than 64 within a second) stays in the locked map, still served.
	n0 := current["n0"].DeepCopy()
	current["n0"] = n0
	memo.Get(n0, struct{}{})
	memo.Compact(current)
	calls = 0
	if got := memo.Get(n0, struct{}{}); got != "n0" || calls != 0 {
		t.Errorf("changed node after a deferred Compact: got %q with %d computations, want %q from the memo", got, calls, "n0")
	}
	if memo.Len() != 51 {
		t.Errorf("Len = %d, want 51 (old n0 is dropped at the next rebuild)", memo.Len())
	}
}

func TestMemoGetDoesNotAllocateOnHit(t *testing.T) {
	memo := New(func(n *v1.Node, _ int) int { return 1 })
	n := st.MakeNode().Name("a").Obj()
	memo.Get(n, 1)
	if allocs := testing.AllocsPerRun(100, func() { memo.Get(n, 1) }); allocs != 0 {
		t.Errorf("Get on a hit: %v allocs, want 0", allocs)
	}
}
