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

// TestTableWraps puts three nodes whose home is the last slot of an 8-slot table: they must take
// the last slot, then wrap to the first two, and a miss homed there must end at the next empty.
func TestTableWraps(t *testing.T) {
	tb := newTable[struct{}, int](0)
	last := len(tb.slots) - 1
	var homed []*v1.Node
	for i := 0; len(homed) < 4; i++ {
		if i > 100000 {
			t.Fatal("no node address hashed to the last slot in 100000 tries")
		}
		if n := st.MakeNode().Name(fmt.Sprint("n", i)).Obj(); tb.home(n) == last {
			homed = append(homed, n)
		}
	}
	for i, n := range homed[:3] {
		tb.put(n, memoEntry[struct{}, int]{value: i})
	}
	for i, want := range []int{last, 0, 1} {
		if got := tb.slots[want].node; got != homed[i] {
			t.Errorf("node %d is not in slot %d", i, want)
		}
		if e, ok := tb.get(homed[i]); !ok || e.value != i {
			t.Errorf("node %d: got %v, %v; want %d", i, e.value, ok, i)
		}
	}
	if _, ok := tb.get(homed[3]); ok {
		t.Error("a node never put was found")
	}
	if _, ok := tb.get(nil); ok {
		t.Error("nil was found")
	}
}

// TestMemoCompactRebuild rebuilds the read table from a previous one: versions carried over are
// served without computing, replaced and deleted versions are dropped, and a node whose value was
// computed again for another input keeps the new one.
func TestMemoCompactRebuild(t *testing.T) {
	calls := 0
	memo := New(func(n *v1.Node, in int) string { calls++; return fmt.Sprint(n.Name, "/", in) })
	current := snapshotOf{}
	for i := 0; i < 200; i++ {
		n := st.MakeNode().Name(fmt.Sprint("n", i)).Obj()
		current[n.Name] = n
		memo.Get(n, 0)
	}
	memo.Compact(current)
	// 70 values computed (more than a trickle, so Compact rebuilds at once): 50 new versions, 20
	// nodes asked with another input; and 40 nodes deleted.
	for i := 0; i < 50; i++ {
		n := current[fmt.Sprint("n", i)].DeepCopy()
		current[n.Name] = n
		memo.Get(n, 0)
	}
	for i := 50; i < 90; i++ {
		delete(current, fmt.Sprint("n", i))
	}
	for i := 90; i < 110; i++ {
		memo.Get(current[fmt.Sprint("n", i)], 1)
	}
	memo.Compact(current)
	if got := memo.Len(); got != 160 {
		t.Errorf("Len = %d, want 160 (50 new versions, 90 carried over, 20 computed again)", got)
	}
	if read := memo.read.Load(); len(read.slots) < 2*read.n {
		t.Errorf("%d slots for %d entries: more than half full", len(read.slots), read.n)
	}
	calls = 0
	for name, n := range current {
		in := 0
		var i int
		if _, err := fmt.Sscanf(name, "n%d", &i); err != nil {
			t.Fatal(err)
		}
		if i >= 90 && i < 110 {
			in = 1
		}
		if got, want := memo.Get(n, in), fmt.Sprint(name, "/", in); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if calls != 0 {
		t.Errorf("%d computations after the rebuild, want 0", calls)
	}
}

// TestMemoConcurrent runs Gets on parallel goroutines while Compact publishes new tables, as
// the scheduler's Filter workers and its scheduling goroutine do (for the race detector).
func TestMemoConcurrent(t *testing.T) {
	memo := New(func(n *v1.Node, _ struct{}) string { return n.Name })
	current := snapshotOf{}
	nodes := make([]*v1.Node, 500)
	for i := range nodes {
		nodes[i] = st.MakeNode().Name(fmt.Sprint("n", i)).Obj()
		current[nodes[i].Name] = nodes[i]
	}
	done := make(chan struct{})
	errs := make(chan string, 4)
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { errs <- "" }()
			for r := 0; r < 50; r++ {
				for _, n := range nodes {
					if got := memo.Get(n, struct{}{}); got != n.Name {
						errs <- fmt.Sprintf("Get(%s) = %q", n.Name, got)
						return
					}
				}
			}
		}()
	}
	go func() {
		defer close(done)
		for r := 0; r < 50; r++ {
			memo.Compact(current)
		}
	}()
	<-done
	for w := 0; w < 4; w++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
