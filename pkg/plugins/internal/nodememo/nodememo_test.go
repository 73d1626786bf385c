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

// TestTable checks the read table's probing at sizes whose home slots collide and wrap around the
// end: every node version put is found with its own entry, and versions never put are not.
func TestTable(t *testing.T) {
	for _, n := range []int{0, 1, 4, 5, 100, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tb := newTable[int, string](n)
			if got := len(tb.slots); got < 2*n || got < 8 || got&(got-1) != 0 {
				t.Fatalf("%d slots for %d nodes, want a power of two >= max(8, %d)", got, n, 2*n)
			}
			nodes := make([]*v1.Node, n)
			for i := range nodes {
				nodes[i] = st.MakeNode().Name(fmt.Sprint("n", i)).Obj()
				tb.put(nodes[i], memoEntry[int, string]{input: i, value: nodes[i].Name})
			}
			if tb.n != n {
				t.Errorf("n = %d, want %d", tb.n, n)
			}
			for i, node := range nodes {
				e, ok := tb.get(node)
				if diff := cmp.Diff(memoEntry[int, string]{input: i, value: node.Name}, e, cmp.AllowUnexported(memoEntry[int, string]{})); !ok || diff != "" {
					t.Fatalf("node %d: found %v, entry (-want +got):\n%s", i, ok, diff)
				}
				// Another version of the same node is another key.
				if _, ok := tb.get(node.DeepCopy()); ok {
					t.Fatalf("node %d: a copy was found", i)
				}
			}
		})
	}
}
