package nodepoolaffinity

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// index maps each pool label key and value to the names of the nodes carrying it, as the
// scheduler's snapshot holds them. It is brought up to date from the snapshot at the start of a
// cycle that needs it, node by node by NodeInfo generation: an informer of its own would lag
// the snapshot (its events arrive on another goroutine), and a node the index had not seen yet
// would be dropped from the search though NodeAffinity accepts it. In the steady state the sweep
// compares a pointer and a generation per node and allocates nothing; a node is re-read only
// when its NodeInfo changed (a binding, a label), and the maps change only when a pool label did.
type index struct {
	keys []string

	mu sync.Mutex
	// infos and gens are the snapshot's node list and each NodeInfo's generation at the last
	// sweep, by position: the snapshot keeps its NodeInfos (and their order) until nodes are
	// added or removed, and bumps a NodeInfo's generation whenever it changes.
	infos []fwk.NodeInfo
	gens  []int64
	// nodes holds each node's values of keys (present[k]: the label exists).
	nodes map[string]*nodeValues
	// byKey[k][value] are the nodes whose label keys[k] is value.
	byKey []map[string]sets.Set[string]
	epoch uint64
}

type nodeValues struct {
	values  []string
	present []bool
	epoch   uint64
}

func newIndex(keys []string) *index {
	x := &index{keys: append([]string(nil), keys...), nodes: map[string]*nodeValues{}, byKey: make([]map[string]sets.Set[string], len(keys))}
	for k := range x.byKey {
		x.byKey[k] = map[string]sets.Set[string]{}
	}
	return x
}

// sync brings the index up to list, the cycle's snapshot.
func (x *index) sync(list []fwk.NodeInfo) {
	if len(list) == len(x.infos) {
		same := true
		for i, ni := range list {
			if ni != x.infos[i] {
				same = false
				break
			}
			if g := ni.GetGeneration(); g != x.gens[i] {
				x.put(ni.Node())
				x.gens[i] = g
			}
		}
		if same {
			return
		}
	}
	// Nodes were added or removed: re-read every node, then drop those no longer listed.
	x.epoch++
	x.infos = append(x.infos[:0], list...)
	x.gens = x.gens[:0]
	for _, ni := range list {
		x.gens = append(x.gens, ni.GetGeneration())
		if n := ni.Node(); n != nil {
			x.put(n).epoch = x.epoch
		}
	}
	for name, nv := range x.nodes {
		if nv.epoch != x.epoch {
			x.remove(name, nv)
		}
	}
}

// put records node's pool label values and returns its entry.
func (x *index) put(node *v1.Node) *nodeValues {
	if node == nil {
		return nil
	}
	nv := x.nodes[node.Name]
	if nv == nil {
		nv = &nodeValues{values: make([]string, len(x.keys)), present: make([]bool, len(x.keys))}
		x.nodes[node.Name] = nv
	}
	for k, key := range x.keys {
		v, ok := node.Labels[key]
		if ok == nv.present[k] && v == nv.values[k] {
			continue
		}
		if nv.present[k] {
			x.drop(k, nv.values[k], node.Name)
		}
		if ok {
			s := x.byKey[k][v]
			if s == nil {
				s = sets.New[string]()
				x.byKey[k][v] = s
			}
			s.Insert(node.Name)
		}
		nv.values[k], nv.present[k] = v, ok
	}
	return nv
}

func (x *index) remove(name string, nv *nodeValues) {
	for k := range x.keys {
		if nv.present[k] {
			x.drop(k, nv.values[k], name)
		}
	}
	delete(x.nodes, name)
}

func (x *index) drop(k int, value, name string) {
	s := x.byKey[k][value]
	s.Delete(name)
	if s.Len() == 0 {
		delete(x.byKey[k], value)
	}
}

// keyIndex is the position of key in keys (-1: not a pool key).
func (x *index) keyIndex(key string) int {
	for k, kk := range x.keys {
		if kk == key {
			return k
		}
	}
	return -1
}

// size is the number of nodes a pin allows.
func (x *index) size(p pool.Pin) int {
	k := x.keyIndex(p.Key)
	n := 0
	for _, v := range p.Values {
		n += x.byKey[k][v].Len()
	}
	return n
}

// nodesOf returns the nodes a pin allows: the index's own set for one value, shared with the
// caller (read-only, and only until the next sync: the framework copies a PreFilterResult's
// set when it merges it, in the same cycle), or a new union of several values.
func (x *index) nodesOf(p pool.Pin) sets.Set[string] {
	k := x.keyIndex(p.Key)
	if len(p.Values) == 1 {
		return x.byKey[k][p.Values[0]]
	}
	out := sets.New[string]()
	for _, v := range p.Values {
		for name := range x.byKey[k][v] {
			out.Insert(name)
		}
	}
	return out
}
