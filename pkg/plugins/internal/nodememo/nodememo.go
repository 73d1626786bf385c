// Package nodememo remembers values the plugins derive from node objects, per node version, so
// that evaluating every node in every scheduling cycle does not repeat the work.
package nodememo

import (
	"sync"
	"sync/atomic"
	"time"

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
// Reads are a plain lookup in an immutable map (no lock, no atomic read-modify-write, so the
// parallel Filter and Score goroutines do not contend). A miss computes the value and parks it
// in a small locked map; Compact, called by the owner at the start of a cycle, folds those into
// a new immutable map and drops versions that left the snapshot.
//
// Memo is safe for concurrent use; Get allocates only on a miss.
type Memo[I comparable, V any] struct {
	compute func(*v1.Node, I) V
	read    atomic.Pointer[map[*v1.Node]memoEntry[I, V]]

	mu          sync.Mutex
	dirty       map[*v1.Node]memoEntry[I, V]
	lastCompact time.Time
}

type memoEntry[I comparable, V any] struct {
	input I
	value V
}

// New returns a memo of compute, which must be a pure function of its arguments.
func New[I comparable, V any](compute func(*v1.Node, I) V) *Memo[I, V] {
	return &Memo[I, V]{compute: compute, dirty: map[*v1.Node]memoEntry[I, V]{}}
}

// Get returns compute(node, input), computing it only if node was not seen with input before.
func (m *Memo[I, V]) Get(node *v1.Node, input I) V {
	if read := m.read.Load(); read != nil {
		if e, ok := (*read)[node]; ok && e.input == input {
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
		n += len(*read)
	}
	return n
}

// NodeGetter returns the node a scheduler snapshot holds under a name (the snapshot's
// NodeInfoLister).
type NodeGetter interface {
	Get(nodeName string) (fwk.NodeInfo, error)
}

// compactInterval bounds how often a trickle of node updates rebuilds the read map; until then
// the few changed nodes are served from the locked map.
const compactInterval = time.Second

// Compact folds the values computed since the last call into the read map, keeping only node
// versions that are in snapshot. It is cheap when nothing changed and rebuilds the map (O(nodes))
// at most once per second unless many nodes changed. Call it at PreFilter or PreScore, before
// the cycle's Gets, from the scheduling goroutine.
func (m *Memo[I, V]) Compact(snapshot NodeGetter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.dirty) == 0 || (len(m.dirty) < 64 && time.Since(m.lastCompact) < compactInterval) {
		return
	}
	m.lastCompact = time.Now()
	var old map[*v1.Node]memoEntry[I, V]
	if read := m.read.Load(); read != nil {
		old = *read
	}
	next := make(map[*v1.Node]memoEntry[I, V], len(old)+len(m.dirty))
	current := func(node *v1.Node) bool {
		ni, err := snapshot.Get(node.Name)
		return err == nil && ni.Node() == node
	}
	for node, e := range old {
		if _, changed := m.dirty[node]; !changed && current(node) {
			next[node] = e
		}
	}
	for node, e := range m.dirty {
		if current(node) {
			next[node] = e
		}
	}
	m.read.Store(&next)
	m.dirty = map[*v1.Node]memoEntry[I, V]{}
}
