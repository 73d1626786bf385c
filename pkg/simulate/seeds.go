package simulate

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WithSeeds returns n copies of the scenario, its maintenance drawing from seed, seed+1, ...
// (the batch order, surge and replacement zones), each named for its seed. A scenario without
// a maintenance draws nothing at random: it is returned once, as it is.
func (sc *Scenario) WithSeeds(n int) []*Scenario {
	if sc.Maintenance == nil || n <= 1 {
		return []*Scenario{sc}
	}
	out := make([]*Scenario, n)
	for i := range out {
		c := *sc
		c.Pools, c.Workloads, c.Services = slices.Clone(sc.Pools), slices.Clone(sc.Workloads), slices.Clone(sc.Services)
		m := *sc.Maintenance
		m.Seed = sc.Maintenance.Seed + int64(i)
		c.Maintenance = &m
		c.Name = fmt.Sprintf("%s seed %d", sc.Name, m.Seed)
		out[i] = &c
	}
	return out
}

// SeededComparison is a scenario run under both modes with several seeds.
type SeededComparison struct {
	Scenario string        `json:"scenario"`
	Seeds    []int64       `json:"seeds"`
	Runs     []*Comparison `json:"runs"`
}

// WriteSeedTable prints, per maintenance scenario run with several seeds, each figure's mean
// and range over the seeds under each mode and the goals judged over them
// (MaintenanceGoalsOver); scenarios of one run get WriteTable's table.
func WriteSeedTable(w io.Writer, seeded []*SeededComparison) error {
	var b strings.Builder
	for _, s := range seeded {
		if len(s.Runs) == 1 {
			if err := WriteTable(&b, s.Runs); err != nil {
				return err
			}
			continue
		}
		modes := len(s.Runs[0].Results)
		header := []string{fmt.Sprintf("SCENARIO %s, %d seeds (%d-%d): mean (range)", s.Scenario, len(s.Seeds), slices.Min(s.Seeds), slices.Max(s.Seeds))}
		byMode := make([][]*Result, modes)
		for j := 0; j < modes; j++ {
			header = append(header, strings.ToUpper(s.Runs[0].Results[j].Mode))
			for _, c := range s.Runs {
				byMode[j] = append(byMode[j], c.Results[j])
			}
		}
		grid := [][]string{header}
		figures := make([]maintenanceFigures, modes)
		for j := range byMode {
			for _, r := range byMode[j] {
				if r.Maintenance == nil {
					return fmt.Errorf("scenario %s: a %s run has no maintenance", s.Scenario, r.Mode)
				}
			}
			figures[j] = summarize(byMode[j])
		}
		for _, row := range []struct {
			label string
			value func(maintenanceFigures) string
		}{
			{"evictions per replica", func(f maintenanceFigures) string { return f.evictions.String(2) }},
			{"refused evictions per replica", func(f maintenanceFigures) string { return f.refusals.String(2) }},
			{"workloads below ceil(2r/3) Ready at some moment", func(f maintenanceFigures) string { return f.belowFloor.Count() }},
			{"zone / update-domain skew at the end", func(f maintenanceFigures) string { return f.zoneSkew.Count() + " / " + f.udSkew.Count() }},
			{"maintenance time (simulated)", func(f maintenanceFigures) string { return f.minutes.String(1) + " min" }},
		} {
			cells := []string{"  " + row.label}
			for _, f := range figures {
				cells = append(cells, row.value(f))
			}
			grid = append(grid, cells)
		}
		if modes == 2 {
			for _, g := range MaintenanceGoalsOver(byMode[0], byMode[1]) {
				verdict := notMet + ": " + g.PoolScheduler
				if g.Met {
					verdict = "met: " + g.PoolScheduler
				}
				grid = append(grid, []string{"  goal: " + g.Name, g.Default, verdict})
			}
		}
		b.WriteString("\n")
		writeGrid(&b, grid, TableWidth)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
