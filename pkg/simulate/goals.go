package simulate

import (
	"fmt"
	"slices"
)

// MaxEvictionsPerReplica is issue #43's goal: one surge upgrade moves each replica about once.
const MaxEvictionsPerReplica = 1.05

// Goal is one of issue #43's maintenance goals, judged on a pool-scheduler run against the
// default scheduler's run of the same scenario.
type Goal struct {
	Name string `json:"name"`
	Met  bool   `json:"met"`
	// Default and PoolScheduler are the figures the goal compares.
	Default       string `json:"default"`
	PoolScheduler string `json:"poolScheduler"`
}

// MaintenanceGoals checks issue #43's goals for a default / pool-scheduler pair of a
// maintenance scenario: evictions per replica <= 1.05 and no more than the default's; no
// workload below its floor; zone and update-domain skew <= 1 at the end; the maintenance's time
// and its refused evictions no more than the default's. Nil if either run has no maintenance.
func MaintenanceGoals(def, ps *Result) []Goal {
	if def == nil || ps == nil || def.Maintenance == nil || ps.Maintenance == nil {
		return nil
	}
	d, p := def.Maintenance, ps.Maintenance
	dSkew, pSkew := endSkew(def), endSkew(ps)
	return []Goal{
		{Name: fmt.Sprintf("evictions per replica <= %.2f and <= default's", MaxEvictionsPerReplica),
			Met:     p.EvictionsPerReplica <= MaxEvictionsPerReplica && p.EvictionsPerReplica <= d.EvictionsPerReplica,
			Default: fmt.Sprintf("%.2f", d.EvictionsPerReplica), PoolScheduler: fmt.Sprintf("%.2f", p.EvictionsPerReplica)},
		{Name: "no workload below ceil(2r/3) Ready", Met: p.BelowFloor == 0,
			Default: fmt.Sprint(d.BelowFloor), PoolScheduler: fmt.Sprint(p.BelowFloor)},
		{Name: "zone / update-domain skew <= 1 at the end", Met: pSkew[0] <= 1 && pSkew[1] <= 1,
			Default: fmt.Sprintf("%d / %d", dSkew[0], dSkew[1]), PoolScheduler: fmt.Sprintf("%d / %d", pSkew[0], pSkew[1])},
		{Name: "maintenance time <= default's", Met: p.Minutes <= d.Minutes,
			// One decimal: the goal compares exact figures, and 101.2 against 101.4 must not read as equal.
			Default: fmt.Sprintf("%.1f min", d.Minutes), PoolScheduler: fmt.Sprintf("%.1f min", p.Minutes)},
		{Name: "refused evictions <= default's", Met: p.Refusals <= d.Refusals,
			Default: fmt.Sprintf("%d (%.2f/replica)", d.Refusals, d.RefusalsPerReplica), PoolScheduler: fmt.Sprintf("%d (%.2f/replica)", p.Refusals, p.RefusalsPerReplica)},
	}
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
