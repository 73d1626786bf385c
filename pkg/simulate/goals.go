package simulate

import (
	"fmt"
	"slices"
)

// FloorTolerance is issue #58's goal: a surge upgrade's evictions per replica within this of
// its floor (aksemu.Result.Floor).
const FloorTolerance = 0.02

// Goal is one of the maintenance goals (issues #43 and #58), judged on pool-scheduler's runs
// against the default scheduler's runs of the same scenario and seeds.
type Goal struct {
	Name string `json:"name"`
	Met  bool   `json:"met"`
	// Default and PoolScheduler are the figures the goal compares.
	Default       string `json:"default"`
	PoolScheduler string `json:"poolScheduler"`
}

// MaintenanceGoals checks the goals for a default / pool-scheduler pair of a maintenance
// scenario (MaintenanceGoalsOver one seed). Nil if either run has no maintenance.
func MaintenanceGoals(def, ps *Result) []Goal {
	return MaintenanceGoalsOver([]*Result{def}, []*Result{ps})
}

// MaintenanceGoalsOver checks the maintenance goals over runs of several seeds, the default
// scheduler's and pool-scheduler's of the same seeds: on the means, evictions per replica no
// more than the default's and, where the operation has a floor, within FloorTolerance of it;
// refused evictions and the maintenance's time no more than the default's; in every run, no
// workload below its floor and zone and update-domain skew <= 1 at the end. Nil if a run has
// no maintenance.
func MaintenanceGoalsOver(defs, pss []*Result) []Goal {
	if len(defs) == 0 || len(pss) == 0 {
		return nil
	}
	for _, r := range append(slices.Clone(defs), pss...) {
		if r == nil || r.Maintenance == nil {
			return nil
		}
	}
	d, p := summarize(defs), summarize(pss)
	evictions := Goal{Name: "evictions per replica <= default's",
		Met:     p.evictions.Mean <= d.evictions.Mean,
		Default: d.evictions.String(2), PoolScheduler: p.evictions.String(2)}
	if floor := p.floor.Mean; floor > 0 {
		evictions.Name = fmt.Sprintf("evictions per replica <= floor %.2f + %.2f and <= default's", floor, FloorTolerance)
		evictions.Met = evictions.Met && p.evictions.Mean <= floor+FloorTolerance
	}
	return []Goal{
		evictions,
		{Name: "no workload below ceil(2r/3) Ready", Met: p.belowFloor.Max == 0,
			Default: d.belowFloor.Count(), PoolScheduler: p.belowFloor.Count()},
		{Name: "zone / update-domain skew <= 1 at the end", Met: p.zoneSkew.Max <= 1 && p.udSkew.Max <= 1,
			Default: d.zoneSkew.Count() + " / " + d.udSkew.Count(), PoolScheduler: p.zoneSkew.Count() + " / " + p.udSkew.Count()},
		// One decimal: the goal compares exact figures, and 101.2 against 101.4 must not read as equal.
		{Name: "maintenance time <= default's", Met: p.minutes.Mean <= d.minutes.Mean,
			Default: d.minutes.String(1) + " min", PoolScheduler: p.minutes.String(1) + " min"},
		{Name: "refused evictions per replica <= default's", Met: p.refusals.Mean <= d.refusals.Mean,
			Default: d.refusals.String(2), PoolScheduler: p.refusals.String(2)},
	}
}

// Spread is a figure over several runs.
type Spread struct {
	Mean, Min, Max float64
	N              int
}

func spreadOf(values []float64) Spread {
	if len(values) == 0 {
		return Spread{}
	}
	s := Spread{Min: values[0], Max: values[0], N: len(values)}
	for _, v := range values {
		s.Mean += v / float64(len(values))
		s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	}
	return s
}

// String is the mean with the given decimals, and its range over more than one run.
func (s Spread) String(decimals int) string {
	if s.N <= 1 {
		return fmt.Sprintf("%.*f", decimals, s.Mean)
	}
	return fmt.Sprintf("%.*f (%.*f-%.*f)", decimals, s.Mean, decimals, s.Min, decimals, s.Max)
}

// Count is String for a count: whole numbers for one run, the mean with one decimal over more.
func (s Spread) Count() string {
	if s.N <= 1 {
		return fmt.Sprintf("%.0f", s.Mean)
	}
	return fmt.Sprintf("%.1f (%.0f-%.0f)", s.Mean, s.Min, s.Max)
}

// maintenanceFigures are one mode's maintenance figures over its runs.
type maintenanceFigures struct {
	evictions, refusals, minutes, floor, belowFloor, zoneSkew, udSkew Spread
}

func summarize(runs []*Result) maintenanceFigures {
	var ev, ref, mins, floor, below, zone, ud []float64
	for _, r := range runs {
		m := r.Maintenance
		skew := endSkew(r)
		ev, ref, mins = append(ev, m.EvictionsPerReplica), append(ref, m.RefusalsPerReplica), append(mins, m.Minutes)
		floor, below = append(floor, m.Floor), append(below, float64(m.BelowFloor))
		zone, ud = append(zone, float64(skew[0])), append(ud, float64(skew[1]))
	}
	return maintenanceFigures{evictions: spreadOf(ev), refusals: spreadOf(ref), minutes: spreadOf(mins), floor: spreadOf(floor),
		belowFloor: spreadOf(below), zoneSkew: spreadOf(zone), udSkew: spreadOf(ud)}
}

// endSkew is the largest zone and update-domain skew of any workload at the end: the report's
// dimensions whose keys hold the zone and the update-domain labels.
func endSkew(r *Result) [2]int {
	var out [2]int
	if r.Report == nil {
		return out
	}
	for d, dim := range r.Report.Dimensions {
		for i, key := range []string{ZoneKey, UpdateDomainKey} {
			if slices.Contains(dim.Keys, key) {
				out[i] = max(out[i], r.Report.MaxSkew(d))
			}
		}
	}
	return out
}
