package simulate

import (
	"fmt"
	"strings"

	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
)

// maintenanceRows are the table's rows for a maintenance scenario: what the operation did
// under each mode, then issue #43's goals (the default's figure, and pool-scheduler's verdict).
func maintenanceRows(c *Comparison) []row {
	has := false
	for _, r := range c.Results {
		has = has || r.Maintenance != nil
	}
	if !has {
		return nil
	}
	m := func(f func(*aksemu.Result) string) func(*Result) string {
		return func(r *Result) string {
			if r.Maintenance == nil {
				return "-"
			}
			return f(r.Maintenance)
		}
	}
	out := []row{
		{label: "maintenance outcome (nodes new, reimaged, removed)", value: m(func(mr *aksemu.Result) string {
			s := fmt.Sprintf("%s (%d, %d, %d)", mr.Outcome, len(mr.NewNodes), len(mr.ReimagedNodes), len(mr.RemovedNodes))
			if len(mr.QuarantinedNodes) > 0 {
				s += fmt.Sprintf("; %d quarantined", len(mr.QuarantinedNodes))
			}
			return s
		})},
		{label: "evictions per replica (evictions / replicas)", value: m(func(mr *aksemu.Result) string {
			return fmt.Sprintf("%.2f (%d / %d)", mr.EvictionsPerReplica, mr.Evictions, mr.Replicas)
		})},
		{label: "refused evictions per replica (refused)", value: m(func(mr *aksemu.Result) string {
			return fmt.Sprintf("%.2f (%d)", mr.RefusalsPerReplica, mr.Refusals)
		})},
		{label: "workloads below ceil(2r/3) Ready at some moment", violation: true, value: m(func(mr *aksemu.Result) string { return count(mr.BelowFloor) })},
		{label: "lowest Ready share of a workload", value: m(lowestReady)},
		{label: "maintenance time (simulated)", value: m(func(mr *aksemu.Result) string { return fmt.Sprintf("%.0f min", mr.Minutes) })},
	}
	if len(c.Results) != 2 {
		return out
	}
	goals := MaintenanceGoals(c.Results[0], c.Results[1])
	for _, g := range goals {
		out = append(out, row{label: "goal: " + g.Name, bad: func(s string) bool { return strings.HasPrefix(s, notMet) }, value: func(r *Result) string {
			if r == c.Results[0] {
				return g.Default
			}
			if g.Met {
				return "met: " + g.PoolScheduler
			}
			return notMet + ": " + g.PoolScheduler
		}})
	}
	return out
}

const notMet = "NOT met"

// lowestReady is the workload that kept the smallest share of its replicas Ready.
func lowestReady(mr *aksemu.Result) string {
	best, name := 2.0, ""
	var w aksemu.MaintainedWorkload
	for _, wl := range mr.Workloads {
		if wl.Replicas == 0 {
			continue
		}
		if share := float64(wl.MinReady) / float64(wl.Replicas); share < best {
			best, name, w = share, wl.Name, wl
		}
	}
	if name == "" {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%s %d/%d)", 100*best, name[strings.LastIndex(name, "/")+1:], w.MinReady, w.Replicas)
}

// Timeline geometry, in SVG pixels.
const (
	timelineWidth  = 300
	timelineHeight = 130
	timelineLeft   = 34
	timelineBottom = 28
	timelineTop    = 8
	timelineRight  = 10
)

type timelineLine struct {
	Mode   string
	Color  string
	Points string
}

type timelineChart struct {
	Workload                   string
	Replicas, Floor            int
	Width, Height              int
	PlotLeft, PlotRight, AxisY int
	PlotTop, FloorY            int
	Lines                      []timelineLine
	YTicks, XTicks             []svgTick
	MinReady                   []string // per mode: "default 20"
}

// timelineCharts draws, per workload of a maintenance scenario, its Ready replicas over the
// maintenance's simulated minutes under each mode (one step line per mode, the floor dashed),
// on one time axis for both modes.
func timelineCharts(c *Comparison) ([]timelineChart, []legendEntry) {
	var maxMinute float64
	names := []string{}
	seen := map[string]bool{}
	byMode := make([]map[string]aksemu.MaintainedWorkload, len(c.Results))
	var legend []legendEntry
	for i, r := range c.Results {
		byMode[i] = map[string]aksemu.MaintainedWorkload{}
		if r.Maintenance == nil {
			continue
		}
		legend = append(legend, legendEntry{Domain: r.Mode, Color: palette[i%len(palette)]})
		maxMinute = max(maxMinute, r.Maintenance.Minutes)
		for _, w := range r.Maintenance.Workloads {
			byMode[i][w.Name] = w
			if !seen[w.Name] {
				seen[w.Name] = true
				names = append(names, w.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	maxMinute = max(maxMinute, 1)
	var out []timelineChart
	for _, name := range names {
		ch := timelineChart{Workload: name, Width: timelineWidth, Height: timelineHeight, PlotLeft: timelineLeft,
			PlotRight: timelineWidth - timelineRight, AxisY: timelineHeight - timelineBottom, PlotTop: timelineTop}
		for i := range c.Results {
			if w, ok := byMode[i][name]; ok {
				ch.Replicas, ch.Floor = max(ch.Replicas, w.Replicas), max(ch.Floor, w.Floor)
			}
		}
		top := max(ch.Replicas, 1)
		x := func(min float64) int {
			return ch.PlotLeft + int(min/maxMinute*float64(ch.PlotRight-ch.PlotLeft)+0.5)
		}
		y := func(v int) int {
			return ch.AxisY - int(float64(v)/float64(top)*float64(ch.AxisY-ch.PlotTop)+0.5)
		}
		ch.FloorY = y(ch.Floor)
		for _, v := range []int{0, ch.Floor, top} {
			if len(ch.YTicks) == 0 || ch.YTicks[len(ch.YTicks)-1].Label != fmt.Sprint(v) {
				ch.YTicks = append(ch.YTicks, svgTick{Pos: y(v), Label: fmt.Sprint(v)})
			}
		}
		for _, f := range []float64{0, 0.5, 1} {
			ch.XTicks = append(ch.XTicks, svgTick{Pos: x(f * maxMinute), Label: fmt.Sprintf("%.0f", f*maxMinute)})
		}
		for i, r := range c.Results {
			w, ok := byMode[i][name]
			if !ok || len(w.Timeline) == 0 {
				continue
			}
			var pts []string
			for j, p := range w.Timeline {
				if j > 0 {
					// A step: the count holds until the next change.
					pts = append(pts, fmt.Sprintf("%d,%d", x(p.Minute), y(w.Timeline[j-1].Ready)))
				}
				pts = append(pts, fmt.Sprintf("%d,%d", x(p.Minute), y(p.Ready)))
			}
			ch.Lines = append(ch.Lines, timelineLine{Mode: r.Mode, Color: palette[i%len(palette)], Points: strings.Join(pts, " ")})
			ch.MinReady = append(ch.MinReady, fmt.Sprintf("%s %d", r.Mode, w.MinReady))
		}
		out = append(out, ch)
	}
	return out, legend
}
