package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// DefaultStartupTaintAfter is how long a node may carry the startup taint before poolctl
// status and audit report it: a node's labels land seconds after it joins (docs/gate.md).
const DefaultStartupTaintAfter = 10 * time.Minute

// StartupTaintPool is a pool some of whose nodes carry the startup taint ("" for nodes without
// a pool label).
type StartupTaintPool struct {
	Pool    string `json:"pool"`
	Nodes   int    `json:"nodes"`
	Tainted int    `json:"tainted"`
}

// LabelerState is what a reader of the cluster knows of pool-labeler's controller: its leader
// Lease and whether it is renewed (handoff.ReadLeader's rule).
type LabelerState struct {
	Lease   string `json:"lease"`
	Running bool   `json:"running"`
	Reason  string `json:"reason,omitempty"`
}

// StartupTaintInputs are what StartupTaints judges.
type StartupTaintInputs struct {
	Gate pool.Gate
	// Sets are the compiled NodePoolLabelSets in view (labelSetNamespaces); Unread the names
	// ("namespace/name") of those elsewhere.
	Sets   *pool.LabelSets
	Unread []string
	Nodes  []*v1.Node
	// Key is the startup taint's key (pool-labeler's --startup-taint-key).
	Key string
	// After: nodes tainted longer than this are reported.
	After   time.Duration
	Now     time.Time
	Labeler LabelerState
}

// StartupTaints returns the pools whose nodes carry the startup taint and, for every node
// carrying it longer than in.After, a finding saying why pool-labeler has not lifted it, by the
// labeler's own rule (pkg/labeler: lifted once NodePoolReady's rule accepts a node of a pool
// with a set in view; never on a node of no pool or of a pool without a set).
func StartupTaints(in StartupTaintInputs) ([]StartupTaintPool, []Finding) {
	byPool := map[string]*StartupTaintPool{}
	var long []Finding
	for _, n := range in.Nodes {
		name, known := in.Gate.Identity.PoolOf(n.Labels)
		p := byPool[name]
		if p == nil {
			p = &StartupTaintPool{Pool: name}
			byPool[name] = p
		}
		p.Nodes++
		since, tainted := pool.StartupTaintedSince(n, in.Key)
		if !tainted {
			continue
		}
		p.Tainted++
		held := in.Now.Sub(since)
		if held <= in.After {
			continue
		}
		f := Finding{Object: "node " + n.Name, Node: n.Name}
		prefix := fmt.Sprintf("tainted %s for %s (since %s): ", in.Key, held.Round(time.Second), since.UTC().Format(time.RFC3339))
		untaint := fmt.Sprintf("kubectl taint node %s %s-", n.Name, in.Key)
		switch {
		case !known:
			f.Detail = prefix + "no pool label: pool-labeler lifts the taint only from nodes of a pool with a NodePoolLabelSet"
			f.Fix = "give the node its pool label at registration, or remove the taint: " + untaint
		case in.Sets.Pool(name) == nil:
			var elsewhere []string
			for _, key := range in.Unread {
				if _, set, _ := strings.Cut(key, "/"); set == name {
					elsewhere = append(elsewhere, key)
				}
			}
			f.Detail = prefix + fmt.Sprintf("pool %s has no NodePoolLabelSet in view: pool-labeler lifts the taint only once a set of the pool says what its labels are", name)
			f.Fix = fmt.Sprintf("create the NodePoolLabelSet %s in a namespace pool-labeler reads, or remove the taint from the pool's registration", name)
			if len(elsewhere) > 0 {
				f.Detail += fmt.Sprintf(" (%s is in a namespace not read)", strings.Join(elsewhere, ", "))
				f.Fix = "read that namespace (labelSets.namespaces): see LABEL SETS NOT READ"
			}
		default:
			v := in.Gate.Check(n.Labels, n.Annotations, in.Sets)
			switch {
			case !in.Labeler.Running:
				f.Detail = prefix + "pool-labeler's controller is not running: " + in.Labeler.Reason
				f.Fix = "start pool-labeler's controller (the chart's labeler.controller.enabled)"
				if !v.Ready() {
					f.Detail += fmt.Sprintf("; the node's labels are not applied (%s: %s)", v.HeldReason(), v.Detail())
				}
			case !v.Ready():
				f.Detail = prefix + fmt.Sprintf("labels not applied (%s): %s", v.HeldReason(), v.Detail())
				f.Fix = fmt.Sprintf("see the set's status and the node's events (kubectl get npls -A; kubectl describe node %s)", n.Name)
			default:
				f.Detail = prefix + "the labels are applied and pool-labeler runs, but the taint is still there: its --startup-taint-key is another key, or it cannot patch the node"
				f.Fix = "check pool-labeler's --startup-taint-key (chart labeler.controller.startupTaintKey) and its log"
			}
		}
		long = append(long, f)
	}
	var pools []StartupTaintPool
	for _, p := range byPool {
		if p.Tainted > 0 {
			pools = append(pools, *p)
		}
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Pool < pools[j].Pool })
	slices.SortFunc(long, func(a, b Finding) int { return strings.Compare(a.Node, b.Node) })
	return pools, long
}
