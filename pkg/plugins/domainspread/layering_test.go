package domainspread

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// TestBurstLayering places a workload's replicas one at a time on zones x update domains x hosts
// (2 hosts per cell), each on a best-scored node (ties broken at random, as the scheduler does),
// and checks every replica count: zone and update-domain skew at most 1, and no host with two
// replicas while a host is empty. Scored on zone and update domain alone, a third of 18-replica
// bursts on 3 x 3 x 2 doubled a host (one cell got 3 replicas while another of its zone got 1);
// the cell layering (scoreState) prevents it.
func TestBurstLayering(t *testing.T) {
	tests := []struct {
		name             string
		zones, uds, reps int
	}{
		{name: "3 zones x 3 update domains", zones: 3, uds: 3, reps: 18},
		{name: "2 zones x 3 update domains", zones: 2, uds: 3, reps: 12},
		{name: "3 zones x 5 update domains", zones: 3, uds: 5, reps: 30},
		{name: "3 zones x 2 update domains", zones: 3, uds: 2, reps: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nodes []*v1.Node
			cell := map[string][2]string{}
			for z := 0; z < tt.zones; z++ {
				for u := 0; u < tt.uds; u++ {
					for h := 0; h < 2; h++ {
						name := fmt.Sprintf("z%d-ud%d-h%d", z, u, h)
						nodes = append(nodes, node(name, fmt.Sprint("zone-", z), fmt.Sprint(u)))
						cell[name] = [2]string{fmt.Sprint("zone-", z), fmt.Sprint(u)}
					}
				}
			}
			for seed := range 50 {
				_, ctx := ktesting.NewTestContext(t)
				rng := rand.New(rand.NewSource(int64(seed)))
				pl := newTestPlugin(t, ctx, defaultArgs(), nil, nodes)
				perHost := map[string]int{}
				for i := range tt.reps {
					pod := rsPod(fmt.Sprint("r", i), "rs-a", "")
					got, status := scores(t, ctx, pl, pod, nodes)
					if status != nil {
						t.Fatal(status)
					}
					top := best(got)
					chosen := top[rng.Intn(len(top))]
					w, _ := workloadOf(pod)
					pl.replicas.place(types.UID(fmt.Sprint("uid-", i)), w, chosen, true, 0)
					perHost[chosen]++
					zones, uds := map[string]int{}, map[string]int{}
					for _, c := range cell {
						zones[c[0]] += 0
						uds[c[1]] += 0
					}
					empty, doubled := false, ""
					for _, n := range nodes {
						zones[cell[n.Name][0]] += perHost[n.Name]
						uds[cell[n.Name][1]] += perHost[n.Name]
						empty = empty || perHost[n.Name] == 0
						if perHost[n.Name] >= 2 {
							doubled = n.Name
						}
					}
					if spread.Skew(zones) > 1 || spread.Skew(uds) > 1 || (empty && doubled != "") {
						t.Fatalf("seed %d, %d replicas: zones %v, update domains %v, host %s doubled while a host is empty; per host %v",
							seed, i+1, zones, uds, doubled, perHost)
					}
				}
			}
		})
	}
}

// TestScoreDoesNotDependOnTheNodesScored: a node's score is the same whether a cycle scores
// every node or a few (percentageOfNodesToScore, a filter that leaves one update domain): the
// cell diagonals count the update domains the node handler numbered as nodes joined, not those
// of the nodes scored so far. Counted from the scored nodes, a burst's first cycles after a restart
// saw fewer update domains than its later ones, and the diagonal being filled moved under it.
func TestScoreDoesNotDependOnTheNodesScored(t *testing.T) {
	var nodes, ud0 []*v1.Node
	for z := range 3 {
		for u := range 3 {
			for h := range 2 {
				n := node(fmt.Sprintf("z%d-ud%d-h%d", z, u, h), fmt.Sprint("zone-", z), fmt.Sprint(u))
				nodes = append(nodes, n)
				if u == 0 {
					ud0 = append(ud0, n)
				}
			}
		}
	}
	tests := []struct {
		name string
		// renumber fills the domain table past its bound before the cycles, so the first cycle
		// starts a new epoch and numbers the domains again.
		renumber bool
	}{
		{name: "domains numbered as the nodes joined"},
		{name: "domains numbered again in a new epoch", renumber: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, ctx, defaultArgs(), nil, nodes)
			w, _ := workloadOf(rsPod("r", "rs-a", ""))
			for i, n := range []string{"z0-ud1-h0", "z1-ud1-h0", "z1-ud0-h1", "z2-ud0-h0"} {
				pl.replicas.place(types.UID(fmt.Sprint("uid-", i)), w, n, true, 0)
			}
			if tt.renumber {
				for i := range 2*len(nodes) + 65 {
					pl.domains.intern(2, domainKey{2: fmt.Sprint("gone-", i)})
				}
			}
			raw := func(scored []*v1.Node) map[string]int64 {
				out := rawScores(t, ctx, pl, rsPod("incoming", "rs-a", ""), nodeInfosOf(t, pl, scored))
				for name := range out {
					if !slices.ContainsFunc(ud0, func(n *v1.Node) bool { return n.Name == name }) {
						delete(out, name)
					}
				}
				return out
			}
			// Few, all, few again: each cycle may be the one that first resolves a node.
			before := raw(ud0)
			all := raw(nodes)
			after := raw(ud0)
			for i, few := range [][]any{{"before", before}, {"after", after}} {
				if diff := cmp.Diff(all, few[1]); diff != "" {
					t.Errorf("%d: raw scores of update domain 0's nodes scored alone %s every node was (-every node scored +only they):\n%s", i, few[0], diff)
				}
			}
		})
	}
}

// TestLateNodeGetsNoDiagonal: a node the scheduler's snapshot holds before the node handler has
// numbered its domains (each handler of the shared informer runs on its own goroutine) brings an
// update domain the cycle's diagonals do not count. It gets no diagonal fill, as a node lacking
// the dimension does, instead of the fill of whichever diagonal its ID wraps onto.
func TestLateNodeGetsNoDiagonal(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var nodes []*v1.Node
	for z := range 3 {
		for u := range 2 {
			nodes = append(nodes, node(fmt.Sprintf("z%d-ud%d", z, u), fmt.Sprint("zone-", z), fmt.Sprint(u)))
		}
	}
	pl := newTestPlugin(t, ctx, defaultArgs(), nil, nodes)
	w, _ := workloadOf(rsPod("r", "rs-a", ""))
	// Both diagonals hold replicas, so a wrapped ID would read a non-zero fill.
	for i, n := range []string{"z0-ud0", "z0-ud1", "z1-ud0"} {
		pl.replicas.place(types.UID(fmt.Sprint("uid-", i)), w, n, true, 0)
	}
	pod := rsPod("incoming", "rs-a", "")
	infos, err := pl.sharedLister.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	state, s := preScored(t, ctx, pl, pod, infos)
	late := framework.NewNodeInfo()
	late.SetNode(node("late", "zone-0", "7"))
	if _, st := pl.Score(ctx, state, pod, late); !st.IsSuccess() {
		t.Fatal(st)
	}
	ids := pl.domainIDs(late.Node(), s.epoch)
	if int(ids[1]) < len(s.diags) {
		t.Fatalf("the late node's update domain has ID %d within the %d diagonals: the test no longer makes a late node", ids[1], len(s.diags))
	}
	if wrapped := s.diags[s.diagonal(ids)]; wrapped == 0 {
		t.Fatalf("the diagonal the late node's ID wraps onto holds no replica: the test shows nothing (diagonals %v)", s.diags)
	}
	if fill := s.diagonalFill(ids); fill != 0 {
		t.Errorf("late node's diagonal fill = %d, want 0 (diagonals %v, its IDs %v)", fill, s.diags, ids[:2])
	}
}
