package simulate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWithSeeds: a maintenance scenario gives one copy per seed, from its own seed on, each
// with its own maintenance; a scenario without one is run once.
func TestWithSeeds(t *testing.T) {
	sc, err := Load("surge-upgrade-small")
	if err != nil {
		t.Fatal(err)
	}
	base := sc.Maintenance.Seed
	copies := sc.WithSeeds(3)
	var names []string
	var seeds []int64
	for _, c := range copies {
		names = append(names, c.Name)
		seeds = append(seeds, c.Maintenance.Seed)
	}
	if diff := cmp.Diff([]int64{base, base + 1, base + 2}, seeds); diff != "" {
		t.Errorf("seeds (-want +got):\n%s", diff)
	}
	if names[0] != "surge-upgrade-small seed 43" || names[2] != "surge-upgrade-small seed 45" {
		t.Errorf("names: %v", names)
	}
	copies[1].Pools[0].Nodes = 99
	if sc.Maintenance.Seed != base || sc.Pools[0].Nodes == 99 {
		t.Errorf("a copy shares the scenario's maintenance or pools")
	}
	if got := sc.WithSeeds(1); len(got) != 1 || got[0] != sc {
		t.Errorf("one seed: %v, want the scenario itself", got)
	}
	plain, err := Load("replica-spread")
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.WithSeeds(5); len(got) != 1 || got[0] != plain {
		t.Errorf("a scenario without a maintenance gave %d runs, want itself once", len(got))
	}
}

// TestWriteSeedTable: over several seeds the table shows each figure's mean and range per mode
// and the goals judged over the seeds.
func TestWriteSeedTable(t *testing.T) {
	runs := []*Comparison{
		{Scenario: "surge seed 1", Results: []*Result{maintained("default", 110, 40, 0, 100, 1), maintained("pool-scheduler", 100, 30, 0, 90, 1)}},
		{Scenario: "surge seed 2", Results: []*Result{maintained("default", 120, 40, 0, 100, 1), maintained("pool-scheduler", 108, 50, 0, 110, 2)}},
	}
	var b bytes.Buffer
	if err := WriteSeedTable(&b, []*SeededComparison{{Scenario: "surge", Seeds: []int64{1, 2}, Runs: runs}}); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"SCENARIO surge, 2 seeds (1-2): mean (range) DEFAULT POOL-SCHEDULER",
		"evictions per replica 1.15 (1.10-1.20) 1.04 (1.00-1.08)",
		"zone / update-domain skew at the end 1.0 (1-1) / 0.0 (0-0) 1.5 (1-2) / 0.0 (0-0)",
		"goal: evictions per replica <= floor 1.03 + 0.02 and <= default's 1.15 (1.10-1.20) met: 1.04 (1.00-1.08)",
		"goal: zone / update-domain skew <= 1 at the end 1.0 (1-1) / 0.0 (0-0) NOT met: 1.5 (1-2) / 0.0 (0-0)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
