package spreadkeeper

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// grid returns one replica per (zone, update domain, host) listed, created in that order.
func grid(cells ...[3]string) []Replica {
	var out []Replica
	for i, c := range cells {
		out = append(out, Replica{Name: fmt.Sprintf("p%02d", i), Created: int64(i), Domains: []string{c[0], c[1], c[2]}})
	}
	return out
}

// full is 3 zones x 3 update domains x hosts per cell, one replica per host.
func full(hosts int) [][3]string {
	var out [][3]string
	for z := 0; z < 3; z++ {
		for ud := 0; ud < 3; ud++ {
			for h := 0; h < hosts; h++ {
				out = append(out, [3]string{fmt.Sprint("z", z), fmt.Sprint("ud", ud), fmt.Sprintf("z%d-ud%d-h%d", z, ud, h)})
			}
		}
	}
	return out
}

// prefixSkews returns, after each removal in order, the largest zone and update-domain skew over
// the domains the replicas occupied at the start.
func prefixSkews(replicas []Replica, order []int) []int {
	var out []int
	left := slices.Repeat([]bool{true}, len(replicas))
	for _, i := range order[:len(order)-1] {
		left[i] = false
		worst := 0
		for d := 0; d < 2; d++ {
			counts := map[string]int{}
			for _, r := range replicas {
				counts[r.Domains[d]] += 0
			}
			for j, r := range replicas {
				if left[j] {
					counts[r.Domains[d]]++
				}
			}
			lo, hi := len(replicas), 0
			for _, c := range counts {
				lo, hi = min(lo, c), max(hi, c)
			}
			worst = max(worst, hi-lo)
		}
		out = append(out, worst)
	}
	return out
}

func TestRemovalOrderKeepsSkew(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	shuffled := full(2)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	tests := []struct {
		name  string
		cells [][3]string
	}{
		{name: "one per host, 3x3x2", cells: full(2)},
		{name: "one per host, created in random order", cells: shuffled},
		{name: "one per cell", cells: full(1)},
		// Greedy by crowding alone can take B/ud2 second and strand zone C, whose replicas
		// sit outside the crowded update domain.
		{name: "a cycle of cells", cells: [][3]string{
			{"A", "1", "a1"}, {"A", "2", "a2"}, {"B", "2", "b2"}, {"B", "3", "b3"}, {"C", "1", "c1"}, {"C", "3", "c3"}}},
		{name: "a host doubled up", cells: [][3]string{
			{"A", "1", "a1"}, {"A", "1", "a1"}, {"B", "2", "b2"}, {"C", "3", "c3"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replicas := grid(tt.cells...)
			order := RemovalOrder(replicas, 3)
			sorted := slices.Sorted(slices.Values(order))
			if diff := cmp.Diff(slices.Collect(func(yield func(int) bool) {
				for i := range replicas {
					if !yield(i) {
						return
					}
				}
			}), sorted); diff != "" {
				t.Fatalf("the order is not a permutation (-want +got):\n%s", diff)
			}
			for k, s := range prefixSkews(replicas, order) {
				if s > 1 {
					t.Errorf("after %d removals (order %v) a dimension's skew is %d, want <= 1", k+1, order, s)
				}
			}
		})
	}
}

func TestRemovalOrderDoubledHostFirst(t *testing.T) {
	replicas := grid([3]string{"A", "1", "a1"}, [3]string{"A", "1", "a2"}, [3]string{"A", "1", "a1"}, [3]string{"B", "2", "b1"}, [3]string{"B", "2", "b2"}, [3]string{"B", "2", "b2"})
	order := RemovalOrder(replicas, 3)
	// A and B alike; the younger replica on a doubled host goes first.
	if diff := cmp.Diff([]int{5, 2}, order[:2]); diff != "" {
		t.Errorf("first removals (-want +got):\n%s", diff)
	}
}

func TestAssignCosts(t *testing.T) {
	type c struct {
		cost int32
		has  bool
	}
	tests := []struct {
		name        string
		present     []c // in removal order
		wantCosts   []int32
		wantChanged []bool
	}{
		{name: "none yet", present: []c{{}, {}, {}}, wantCosts: []int32{0, 1024, 2048}, wantChanged: []bool{true, true, true}},
		{name: "already rising", present: []c{{-5, true}, {7, true}, {9000, true}}, wantCosts: []int32{-5, 7, 9000}, wantChanged: []bool{false, false, false}},
		{name: "a new replica between two", present: []c{{0, true}, {}, {1024, true}}, wantCosts: []int32{0, 512, 1024}, wantChanged: []bool{false, true, false}},
		{name: "new replicas at both ends", present: []c{{}, {0, true}, {1024, true}, {}}, wantCosts: []int32{-1024, 0, 1024, 2048}, wantChanged: []bool{true, false, false, true}},
		{name: "one out of place", present: []c{{0, true}, {3000, true}, {1024, true}, {2048, true}}, wantCosts: []int32{0, 512, 1024, 2048}, wantChanged: []bool{false, true, false, false}},
		{name: "no room between: renumbered", present: []c{{0, true}, {}, {1, true}}, wantCosts: []int32{0, 1024, 2048}, wantChanged: []bool{false, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var replicas []Replica
			var order []int
			// Stored in reverse, so the order is not the identity.
			for i := len(tt.present) - 1; i >= 0; i-- {
				replicas = append(replicas, Replica{Name: fmt.Sprint(i), Cost: tt.present[i].cost, HasCost: tt.present[i].has})
			}
			for i := range tt.present {
				order = append(order, len(tt.present)-1-i)
			}
			costs, changed := AssignCosts(replicas, order)
			var gotCosts []int32
			var gotChanged []bool
			for _, i := range order {
				gotCosts = append(gotCosts, costs[i])
				gotChanged = append(gotChanged, changed[i])
			}
			if diff := cmp.Diff(tt.wantCosts, gotCosts); diff != "" {
				t.Errorf("costs in removal order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantChanged, gotChanged); diff != "" {
				t.Errorf("changed in removal order (-want +got):\n%s", diff)
			}
		})
	}
}

// After a scale-down removes the first replicas of the order, the replicas left keep their costs:
// the scale-down itself costs no write.
func TestScaleDownRewritesNothing(t *testing.T) {
	replicas := grid(full(2)...)
	order := RemovalOrder(replicas, 3)
	costs, _ := AssignCosts(replicas, order)
	var left []Replica
	for _, i := range order[9:] {
		r := replicas[i]
		r.Cost, r.HasCost = costs[i], true
		left = append(left, r)
	}
	_, changed := AssignCosts(left, RemovalOrder(left, 3))
	if n := len(slices.DeleteFunc(changed, func(c bool) bool { return !c })); n != 0 {
		t.Errorf("%d of 9 replicas left need a new cost after the scale-down, want 0", n)
	}
}

// withCosts gives replicas the costs listed, in order.
func withCosts(replicas []Replica, costs ...int32) []Replica {
	out := slices.Clone(replicas)
	for i, c := range costs {
		out[i].Cost, out[i].HasCost = c, true
	}
	return out
}

func TestHolds(t *testing.T) {
	// Six replicas placed as DomainSpread spreads them over 3 zones x 2 update domains: the
	// costs a binding gives fall with each placement.
	placed := grid(
		[3]string{"z0", "ud0", "h0"}, [3]string{"z1", "ud1", "h1"}, [3]string{"z2", "ud0", "h2"},
		[3]string{"z0", "ud1", "h3"}, [3]string{"z1", "ud0", "h4"}, [3]string{"z2", "ud1", "h5"},
	)
	tests := []struct {
		name     string
		replicas []Replica
		want     bool
	}{
		{name: "costs in placement order", replicas: withCosts(placed, 0, -1024, -2048, -3072, -4096, -5120), want: true},
		{name: "after a scale-down that removed the cheapest", replicas: withCosts(placed[:4], 0, -1024, -2048, -3072), want: true},
		{name: "a replica without a cost", replicas: withCosts(placed, 0, -1024, -2048, -3072, -4096)[:6], want: false},
		{name: "two alike costs leave the order to the controller's later criteria", replicas: withCosts(placed, 0, -1024, -2048, -3072, -4096, -4096), want: false},
		// Cheapest first: both z0 replicas, then both z1: zone skew 2 after the second removal.
		{name: "an order that empties a zone first", replicas: withCosts(placed, -5120, -2048, 0, -4096, -1024, -3072), want: false},
		{name: "one replica", replicas: withCosts(placed[:1], 7), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Holds(tt.replicas, 3); got != tt.want {
				t.Errorf("Holds = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHoldsAcceptsWhatItsOwnOrderWrites: the costs the keeper writes for its own removal order
// hold, so a second pass writes nothing.
func TestHoldsAcceptsWhatItsOwnOrderWrites(t *testing.T) {
	replicas := grid(full(2)...)
	costs, _ := AssignCosts(replicas, RemovalOrder(replicas, 3))
	if !Holds(withCosts(replicas, costs...), 3) {
		t.Errorf("the keeper's own costs %v do not hold", costs)
	}
}
