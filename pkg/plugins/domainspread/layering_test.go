package domainspread

import (
	"fmt"
	"math/rand"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
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
					if pool.Skew(zones) > 1 || pool.Skew(uds) > 1 || (empty && doubled != "") {
						t.Fatalf("seed %d, %d replicas: zones %v, update domains %v, host %s doubled while a host is empty; per host %v",
							seed, i+1, zones, uds, doubled, perHost)
					}
				}
			}
		})
	}
}
