package nodepoolready

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/internal/nodememo"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// census counts the nodes that are not ready under the current label sets, as the plugin's node
// handler sees them, so that PreFilter can skip Filter for a whole cycle in the steady state of
// a cluster (every node ready): one plugin call fewer per node and cycle.
//
// The handler runs in a goroutine of its own, not in step with the scheduler's cache, so the
// cycle's snapshot can hold a node version the census has not judged yet (a node that joined a
// moment ago without its labels) or one it has already moved past. The census therefore only
// decides when Filter may be skipped; the guarantee is Reserve's, which judges the one chosen
// node as the snapshot holds it. A node found not ready there becomes a suspect, and no cycle
// skips Filter while the snapshot still holds the suspect's version.
type census struct {
	ready   func(node *v1.Node, sets *pool.LabelSets) bool
	current func() *pool.LabelSets
	// list returns every node, for a recount (the informer's store; nil: none).
	list func() ([]*v1.Node, error)

	mu sync.Mutex
	// ready holds, per node the handler has seen, whether its latest version is ready under
	// sets. Only the verdict is kept: holding node objects (or their label maps) would keep a
	// second copy of every node alive.
	nodes   map[string]bool
	sets    *pool.LabelSets
	unready int

	// Read without the lock by PreFilter. judged is nil while a recount runs, so a reader never
	// pairs one view of the label sets with a count made under another.
	judged       atomic.Pointer[pool.LabelSets]
	unreadyCount atomic.Int64
	synced       atomic.Bool
	hasSynced    func() bool

	suspectMu    sync.Mutex
	suspects     map[string]*v1.Node
	suspectCount atomic.Int32
}

// newCensus judges nodes with ready under the label sets current returns.
func newCensus(ready func(*v1.Node, *pool.LabelSets) bool, current func() *pool.LabelSets) *census {
	return &census{ready: ready, current: current, nodes: map[string]bool{}, suspects: map[string]*v1.Node{}}
}

// put records node's latest version. The label sets are read under the lock, so a recount for
// newer sets is never undone by an event handled with older ones.
func (c *census) put(node *v1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sets := c.current(); sets != c.sets {
		c.recountLocked(sets)
	}
	c.setLocked(node.Name, c.ready(node, c.sets))
	c.publishLocked()
}

func (c *census) setLocked(name string, ready bool) {
	if was, ok := c.nodes[name]; ok && !was {
		c.unready--
	}
	if !ready {
		c.unready++
	}
	c.nodes[name] = ready
}

// remove forgets a deleted node.
func (c *census) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ready, ok := c.nodes[name]; ok {
		if !ready {
			c.unready--
		}
		delete(c.nodes, name)
		c.publishLocked()
	}
}

// recount judges every node again, after the label sets changed.
func (c *census) recount() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sets := c.current(); sets != c.sets {
		c.recountLocked(sets)
		c.publishLocked()
	}
}

// recountLocked judges the nodes of the informer's store under sets. The store can be ahead of
// the handler; the events still to come for older versions are judged in turn, and the census
// settles on the latest.
func (c *census) recountLocked(sets *pool.LabelSets) {
	c.judged.Store(nil)
	c.sets, c.unready = sets, 0
	c.nodes = map[string]bool{}
	if c.list == nil {
		return
	}
	nodes, err := c.list()
	if err != nil {
		// The store's lister does not fail; were it to, the census stays unjudged (no skip).
		c.sets = nil
		return
	}
	for _, n := range nodes {
		c.setLocked(n.Name, c.ready(n, sets))
	}
}

func (c *census) publishLocked() {
	c.unreadyCount.Store(int64(c.unready))
	unreadyNodes.Set(float64(c.unready))
	if c.sets != nil {
		c.judged.Store(c.sets)
	}
}

// handlerSynced reports whether the plugin's node handler has seen every node of the informer's
// initial list (always, without an informer). Before, the pools labelled from sets out of view
// are not all known, so no node may be judged.
func (c *census) handlerSynced() bool {
	if c.synced.Load() || c.hasSynced == nil {
		return true
	}
	if !c.hasSynced() {
		return false
	}
	c.synced.Store(true)
	return true
}

// allReady reports whether Filter may be skipped in a cycle that judges nodes under sets: the
// handler has seen every node, finds all of them ready under sets, and the snapshot holds no
// suspect's version. Constant time unless there are suspects.
func (c *census) allReady(sets *pool.LabelSets, snapshot nodememo.NodeGetter) bool {
	if c.hasSynced == nil || !c.handlerSynced() {
		return false
	}
	if c.judged.Load() != sets || c.unreadyCount.Load() != 0 {
		return false
	}
	return c.suspectCount.Load() == 0 || !c.suspectsInSnapshot(snapshot)
}

// suspect records a node version the snapshot holds and Reserve found not ready.
func (c *census) suspect(node *v1.Node) {
	c.suspectMu.Lock()
	defer c.suspectMu.Unlock()
	c.suspects[node.Name] = node
	c.suspectCount.Store(int32(len(c.suspects)))
}

// suspectsInSnapshot forgets the suspects whose version the snapshot no longer holds and reports
// whether any is left.
func (c *census) suspectsInSnapshot(snapshot nodememo.NodeGetter) bool {
	c.suspectMu.Lock()
	defer c.suspectMu.Unlock()
	for name, node := range c.suspects {
		if ni, err := snapshot.Get(name); err != nil || ni.Node() != node {
			delete(c.suspects, name)
		}
	}
	c.suspectCount.Store(int32(len(c.suspects)))
	return len(c.suspects) > 0
}
