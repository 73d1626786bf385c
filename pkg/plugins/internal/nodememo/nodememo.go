// Package nodememo remembers values the plugins derive from node objects, per node version, so
// that evaluating every node in every scheduling cycle does not repeat the work.
package nodememo

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Memo remembers a value derived from a node object and one more input (the label-set index
// a readiness verdict was judged against, say), so that plugins evaluating every node in every
// scheduling cycle do not repeat label-map lookups for nodes that did not change.
//
// The scheduler's cache never mutates a node object: an update replaces the *v1.Node, while the
// pointer stays the same across the far more frequent pod changes on the node. The pointer
// therefore identifies the node's version.
//
// Reads are a probe of an immutable table (no lock, no atomic read-modify-write, so the parallel
// Filter and Score goroutines do not contend). A miss computes the value and parks it in a small
// locked map; Compact, called by the owner at the start of a cycle, folds those into a new
// immutable table and drops versions that left the snapshot.
//
// Memo is safe for concurrent use; Get allocates only on a miss.
type Memo[I comparable, V any] struct {
	compute func(*v1.Node, I) V
	read    atomic.Pointer[table[I, V]]

	mu          sync.Mutex
	dirty       map[*v1.Node]memoEntry[I, V]
	lastCompact time.Time
}

type memoEntry[I comparable, V any] struct {
	input I
	value V
}

// table is the memo's read side: open addressing with linear probing over node pointers, at most
// half full, built by Compact and never written after. A probe usually reads one slot, key and
// value side by side, so one cache line per node; a Go map reads a group's control word and
// then a slot, two lines. At thousands of nodes the memo does not stay in cache between a
// node's visits, so those loads are most of a plugin's per-node cost (docs/performance.md).
type table[I comparable, V any] struct {
	slots []slot[I, V]
	// shift keeps the product's top log2(len(slots)) bits: the home slot.
	shift uint
	n     int
}

type slot[I comparable, V any] struct {
	node *v1.Node // nil: empty
	memoEntry[I, V]
}

// newTable returns a table with room for n node versions at most half full (8 slots at least).
func newTable[I comparable, V any](n int) *table[I, V] {
	size := 8
	if n > size/2 {
		size = 1 << bits.Len(uint(2*n-1))
	}
	return &table[I, V]{slots: make([]slot[I, V], size), shift: uint(64 - bits.Len(uint(size-1)))}
}

// home is the node's first slot: Fibonacci hashing of its address. The address only spreads the
// nodes over slots; the slot holds the pointer itself, and the heap does not move objects.
func (t *table[I, V]) home(node *v1.Node) int {
	return int((uint64(uintptr(unsafe.Pointer(node))) * 0x9e3779b97f4a7c15) >> t.shift)
}

func (t *table[I, V]) get(node *v1.Node) (memoEntry[I, V], bool) {
	mask := len(t.slots) - 1
	for i := t.home(node); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.node == nil {
			return memoEntry[I, V]{}, false
		}
		if s.node == node {
			return s.memoEntry, true
		}
	}
}

// put adds a node version the table does not hold; only while building it.
func (t *table[I, V]) put(node *v1.Node, e memoEntry[I, V]) {
	mask := len(t.slots) - 1
	i := t.home(node)
	for t.slots[i].node != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = slot[I, V]{node: node, memoEntry: e}
	t.n++
}

// New returns a memo of compute, which must be a pure function of its arguments.
func New[I comparable, V any](compute func(*v1.Node, I) V) *Memo[I, V] {
	return &Memo[I, V]{compute: compute, dirty: map[*v1.Node]memoEntry[I, V]{}}
}

// Get returns compute(node, input), computing it only if node was not seen with input before.
func (m *Memo[I, V]) Get(node *v1.Node, input I) V {
	if read := m.read.Load(); read != nil {
		if e, ok := read.get(node); ok && e.input == input {
			return e.value
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.dirty[node]; ok && e.input == input {
		return e.value
	}
	e := memoEntry[I, V]{input: input, value: m.compute(node, input)}
	m.dirty[node] = e
	return e.value
}

// Len is the number of node versions remembered.
func (m *Memo[I, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.dirty)
	if read := m.read.Load(); read != nil {
		n += read.n
	}
	return n
}

// NodeGetter returns the node a scheduler snapshot holds under a name (the snapshot's
// NodeInfoLister).
type NodeGetter interface {
	Get(nodeName string) (fwk.NodeInfo, error)
}

// compactInterval bounds how often a trickle of node updates rebuilds the read table; until then
// the few changed nodes are served from the locked map.
const compactInterval = time.Second

// Compact folds the values computed since the last call into the read table, keeping only node
// versions that are in snapshot. It is cheap when nothing changed and rebuilds the table (O(nodes))
// at most once per second unless many nodes changed. Call it at PreFilter or PreScore, before
// the cycle's Gets, from the scheduling goroutine.
func (m *Memo[I, V]) Compact(snapshot NodeGetter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.dirty) == 0 || (len(m.dirty) < 64 && time.Since(m.lastCompact) < compactInterval) {
		return
	}
	m.lastCompact = time.Now()
	old := m.read.Load()
	current := func(node *v1.Node) bool {
		ni, err := snapshot.Get(node.Name)
		return err == nil && ni.Node() == node
	}
	size := len(m.dirty)
	if old != nil {
		size += old.n
	}
	next := newTable[I, V](size)
	if old != nil {
		for _, s := range old.slots {
			if s.node == nil {
				continue
			}
			if _, changed := m.dirty[s.node]; !changed && current(s.node) {
				next.put(s.node, s.memoEntry)
			}
		}
	}
	for node, e := range m.dirty {
		if current(node) {
			next.put(node, e)
		}
	}
	m.read.Store(next)
	m.dirty = map[*v1.Node]memoEntry[I, V]{}
}
