package simulate

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

// Comparison is one scenario run under every mode.
type Comparison struct {
	Scenario    string    `json:"scenario"`
	Description string    `json:"description"`
	Results     []*Result `json:"results"`
}

type row struct {
	label string
	value func(*Result) string
	// violation marks rows where anything above zero is a problem.
	violation bool
	// bad, if set, marks the cells that are a problem instead.
	bad func(string) bool
}

func count(n int) string { return fmt.Sprint(n) }

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// rowsFor lists the table's rows; spread rows come one per dimension of the policy (the shipped
// profile's DomainSpread dimensions).
func rowsFor(c *Comparison) []row {
	var dims []report.Dimension
	if len(c.Results) > 0 && c.Results[0].Report != nil {
		dims = c.Results[0].Report.Dimensions
	}
	out := []row{
		{label: "pods bound to nodes whose pool labels were not applied", violation: true, value: func(r *Result) string { return count(len(r.Report.PodsOnNotReadyNodes)) }},
		{label: "user pods on system pools", violation: true, value: func(r *Result) string { return count(len(r.Report.UserPodsOnSystemNodes)) }},
		{label: "load-balancer findings (Local traffic)", violation: true, value: func(r *Result) string { return count(len(r.Report.LoadBalancerMismatches)) }},
		{label: "Local-traffic Services with uneven per-pod shares", violation: true, value: func(r *Result) string { return count(len(r.Report.LoadBalancerUnevenTraffic)) }},
	}
	names := make([]string, len(dims))
	for d, dim := range dims {
		d := d
		names[d] = dim.Name
		out = append(out, row{label: "replica sets confined to one " + dim.Name, violation: true, value: func(r *Result) string { return count(r.Report.ConfinedWorkloads(d)) }})
	}
	out = append(out,
		row{label: "replica sets with skew > 1", violation: true, value: func(r *Result) string { return count(skewed(r)) }},
		row{label: "max skew: " + strings.Join(names, " / "), value: func(r *Result) string {
			skews := make([]string, len(names))
			for d := range names {
				skews[d] = count(r.Report.MaxSkew(d))
			}
			return strings.Join(skews, " / ")
		}},
	)
	out = append(out, row{label: "domains per pool: " + strings.Join(names, " / "), value: poolDomainsSummary})
	out = append(out, rows...)
	out = append(out, maintenanceRows(c)...)
	for _, r := range c.Results {
		if r.OptedIn > 0 {
			out = append(out, row{label: "pods given to it by namespace label (spec unedited)", value: func(r *Result) string {
				if r.OptedIn == 0 {
					return "-"
				}
				return count(r.OptedIn)
			}})
			break
		}
	}
	return out
}

var rows = []row{
	{label: "pods bound / created", value: func(r *Result) string { return fmt.Sprintf("%d / %d", r.Bound, r.Pods) }},
	{label: "pods pending (reason)", value: func(r *Result) string { return pendingSummary(r) }},
	{label: "label-to-bind latency p50 / p99", value: func(r *Result) string {
		return fmt.Sprintf("%s / %s", ms(r.LabelToBindP50), ms(r.LabelToBindP99))
	}},
	{label: "scheduling throughput", value: func(r *Result) string {
		if r.Maintenance != nil {
			return "-" // pods come as the maintenance evicts them: no measure of the scheduler
		}
		return fmt.Sprintf("%.0f pods/s", r.Throughput)
	}},
}

// poolDomainsSummary is each pool's distinct domains per dimension, naming the dimensions that
// cannot spread the pool: "userpool 1/3/6 (zone not spread)".
func poolDomainsSummary(r *Result) string {
	var parts []string
	for _, p := range r.Report.Domains {
		counts := make([]string, len(p.Dimensions))
		var flat []string
		for d, dim := range p.Dimensions {
			counts[d] = count(dim.Distinct)
			if !dim.Spread() && p.Nodes >= 2 {
				flat = append(flat, dim.Name)
			}
		}
		part := p.Pool + " " + strings.Join(counts, "/")
		if len(flat) > 0 {
			part += " (" + strings.Join(flat, ", ") + " not spread)"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func skewed(r *Result) int {
	n := 0
	for _, w := range r.Report.Workloads {
		for _, s := range w.Skew {
			if s > 1 {
				n++
				break
			}
		}
	}
	return n
}

func pendingSummary(r *Result) string {
	if len(r.Report.PendingPods) == 0 {
		return "0"
	}
	reasons := map[string]int{}
	for _, f := range r.Report.PendingPods {
		reasons[shortReason(f.Detail)]++
	}
	var parts []string
	for reason, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d: %s", n, reason))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", len(r.Report.PendingPods), strings.Join(parts, "; "))
}

// shortReason keeps the per-node part of a FailedScheduling message.
func shortReason(msg string) string {
	if i := strings.Index(msg, ": "); i >= 0 && strings.Contains(msg[:i], "nodes are available") {
		msg = msg[i+2:]
	}
	if i := strings.Index(msg, ". "); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSuffix(msg, ".")
}

// TableWidth is the widest line WriteTable prints: a terminal of 120 columns shows the table
// without wrapping it.
const TableWidth = 120

// WriteTable prints the side-by-side comparison of every scenario: per scenario a header line
// and a row per measure, the label first, then a column per mode. Cells too wide for
// TableWidth wrap within their column (at "; " between items, else at spaces).
func WriteTable(w io.Writer, comparisons []*Comparison) error {
	var b strings.Builder
	for _, c := range comparisons {
		header := []string{"SCENARIO " + c.Scenario}
		for _, r := range c.Results {
			header = append(header, strings.ToUpper(r.Mode))
		}
		grid := [][]string{header}
		for _, row := range rowsFor(c) {
			cells := []string{"  " + row.label}
			for _, r := range c.Results {
				cells = append(cells, row.value(r))
			}
			grid = append(grid, cells)
		}
		b.WriteString("\n")
		writeGrid(&b, grid, TableWidth)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableGap separates the table's columns.
const tableGap = 2

// writeGrid prints rows of cells in columns, each as wide as its widest cell when that fits in
// width; otherwise the widest columns get narrower, down to an equal share of what the narrower
// ones leave, and their cells wrap onto further lines.
func writeGrid(b *strings.Builder, grid [][]string, width int) {
	cols := 0
	for _, row := range grid {
		cols = max(cols, len(row))
	}
	if cols == 0 {
		return
	}
	natural := make([]int, cols)
	for _, row := range grid {
		for i, cell := range row {
			natural[i] = max(natural[i], len(cell))
		}
	}
	widths := fitColumns(natural, width-tableGap*(cols-1))
	for _, row := range grid {
		wrapped := make([][]string, cols)
		lines := 1
		for i := range cols {
			cell := ""
			if i < len(row) {
				cell = row[i]
			}
			indent := len(cell) - len(strings.TrimLeft(cell, " "))
			wrapped[i] = wrapCell(strings.TrimLeft(cell, " "), widths[i]-indent)
			for j := range wrapped[i] {
				wrapped[i][j] = strings.Repeat(" ", indent) + wrapped[i][j]
			}
			lines = max(lines, len(wrapped[i]))
		}
		for l := range lines {
			var line strings.Builder
			for i := range cols {
				text := ""
				if l < len(wrapped[i]) {
					text = wrapped[i][l]
				}
				line.WriteString(text)
				if i < cols-1 {
					line.WriteString(strings.Repeat(" ", widths[i]-len(text)+tableGap))
				}
			}
			b.WriteString(strings.TrimRight(line.String(), " "))
			b.WriteString("\n")
		}
	}
}

// minValueColumn is the narrowest a value column gets while the label column keeps its width.
const minValueColumn = 24

// fitColumns returns column widths that sum to at most total: the natural ones when they fit;
// else the label column (the first) keeps its width and the value columns share the rest, as
// long as each can have minValueColumn; else all of them share total.
func fitColumns(natural []int, total int) []int {
	sum := 0
	for _, w := range natural {
		sum += w
	}
	if sum <= total {
		return append([]int(nil), natural...)
	}
	if len(natural) > 1 && (total-natural[0])/(len(natural)-1) >= minValueColumn {
		return append([]int{natural[0]}, waterFill(natural[1:], total-natural[0])...)
	}
	return waterFill(natural, total)
}

// waterFill shares total among columns of the natural widths: a column narrower than an equal
// share of the room the others leave keeps its width, the others get that share (at least 8).
func waterFill(natural []int, total int) []int {
	widths := append([]int(nil), natural...)
	fixed, room := make([]bool, len(widths)), total
	for {
		open := 0
		for i := range widths {
			if !fixed[i] {
				open++
			}
		}
		if open == 0 {
			return widths
		}
		share := max(room/open, 8)
		changed := false
		for i, w := range natural {
			if !fixed[i] && w <= share {
				fixed[i], room, changed = true, room-w, true
			}
		}
		if !changed {
			for i := range widths {
				if !fixed[i] {
					widths[i] = share
				}
			}
			return widths
		}
	}
}

// wrapCell breaks text into lines of at most width: after "; " between items where it can, else
// at a space, else anywhere.
func wrapCell(text string, width int) []string {
	width = max(width, 1)
	var lines []string
	for len(text) > width {
		cut := strings.LastIndex(text[:width+1], "; ")
		if cut > 0 {
			cut++ // keep the ";" on this line
		} else if cut = strings.LastIndex(text[:width+1], " "); cut <= 0 {
			cut = width
		}
		lines = append(lines, strings.TrimRight(text[:cut], " "))
		text = strings.TrimLeft(text[cut:], " ")
	}
	return append(lines, text)
}

// WriteJSON writes the comparisons as JSON.
func WriteJSON(w io.Writer, comparisons []*Comparison) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(comparisons)
}

// Violations sums the violation rows of a result.
func Violations(r *Result) int {
	n := len(r.Report.PodsOnNotReadyNodes) + len(r.Report.UserPodsOnSystemNodes) + len(r.Report.LoadBalancerMismatches) + len(r.Report.LoadBalancerUnevenTraffic) + skewed(r)
	for d := range r.Report.Dimensions {
		n += r.Report.ConfinedWorkloads(d)
	}
	return n
}

// WriteHTML writes a self-contained page: per scenario the table, then for every spread
// dimension a chart per mode (inline SVG: each workload's replicas per domain, stacked, with axes
// and a legend of the domains), and the per-workload detail behind a disclosure.
func WriteHTML(w io.Writer, comparisons []*Comparison) error {
	type cell struct {
		Text      string
		Violation bool
	}
	type tableRow struct {
		Label string
		Cells []cell
	}
	type section struct {
		Scenario, Description string
		Modes                 []string
		Rows                  []tableRow
		Dimensions            []dimensionCharts
		Detail                workloadDetail
		Timelines             []timelineChart
		TimelineLegend        []legendEntry
	}
	var sections []section
	for _, c := range comparisons {
		s := section{Scenario: c.Scenario, Description: c.Description}
		for _, r := range c.Results {
			s.Modes = append(s.Modes, r.Mode)
		}
		for _, rw := range rowsFor(c) {
			tr := tableRow{Label: rw.label}
			for _, r := range c.Results {
				v := rw.value(r)
				bad := rw.violation && v != "0"
				if rw.bad != nil {
					bad = rw.bad(v)
				}
				tr.Cells = append(tr.Cells, cell{Text: v, Violation: bad})
			}
			s.Rows = append(s.Rows, tr)
		}
		s.Dimensions = spreadCharts(c)
		s.Detail = detailOf(c)
		s.Timelines, s.TimelineLegend = timelineCharts(c)
		sections = append(sections, s)
	}
	return htmlTemplate.Execute(w, sections)
}

// Chart geometry, in SVG pixels.
const (
	chartMaxWorkloads = 40
	chartLeft         = 44 // y-axis labels
	chartBottom       = 34 // x-axis labels and title
	chartTop          = 12
	chartPlotHeight   = 150
	chartBarWidth     = 12
	chartBarGap       = 5
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1b9e77", "#d95f02"}

type svgRect struct {
	X, Y, W, H int
	Fill       string
	Workload   string
	Domain     string
	Title      string
}

type svgTick struct {
	Pos   int
	Label string
}

type svgChart struct {
	Mode              string
	MaxSkew           int
	Width, Height     int
	PlotLeft, PlotTop int
	PlotRight, AxisY  int
	Bars              []svgRect
	YTicks, XTicks    []svgTick
	XTitleX, YTitleY  int
	Workloads, Shown  int
}

type legendEntry struct{ Domain, Color string }

// dimensionCharts is one dimension: a chart per mode and the legend they share.
type dimensionCharts struct {
	Name   string
	Keys   string
	Charts []svgChart
	Legend []legendEntry
	// Repeats: more domains than colours; colours repeat in legend order.
	Repeats bool
}

// spreadCharts draws, for every dimension of the comparison's reports, each mode's workloads
// (the first 40) as stacked bars of replicas per domain. The y axis is shared by the modes, so
// their charts compare by eye, and a domain has the same colour in every chart of a dimension.
func spreadCharts(c *Comparison) []dimensionCharts {
	if len(c.Results) == 0 || c.Results[0].Report == nil {
		return nil
	}
	maxReplicas := 1
	for _, r := range c.Results {
		for _, wl := range r.Report.Workloads {
			maxReplicas = max(maxReplicas, wl.Replicas)
		}
	}
	var out []dimensionCharts
	for d, dim := range c.Results[0].Report.Dimensions {
		dc := dimensionCharts{Name: dim.Name, Keys: strings.Join(dim.Keys, ", ")}
		domainSet := map[string]bool{}
		for _, r := range c.Results {
			for _, wl := range r.Report.Workloads {
				if d < len(wl.Domains) {
					for dom := range wl.Domains[d] {
						domainSet[dom] = true
					}
				}
			}
		}
		domains := make([]string, 0, len(domainSet))
		for dom := range domainSet {
			domains = append(domains, dom)
		}
		sort.Strings(domains)
		color := map[string]string{}
		for i, dom := range domains {
			color[dom] = palette[i%len(palette)]
			dc.Legend = append(dc.Legend, legendEntry{Domain: dom, Color: color[dom]})
		}
		dc.Repeats = len(domains) > len(palette)
		for _, r := range c.Results {
			dc.Charts = append(dc.Charts, spreadChart(r, d, dim.Name, maxReplicas, color))
		}
		out = append(out, dc)
	}
	return out
}

func spreadChart(r *Result, d int, dimName string, maxReplicas int, color map[string]string) svgChart {
	workloads := r.Report.Workloads
	ch := svgChart{Mode: r.Mode, Workloads: len(workloads), PlotLeft: chartLeft, PlotTop: chartTop}
	if len(workloads) > chartMaxWorkloads {
		workloads = workloads[:chartMaxWorkloads]
	}
	ch.Shown = len(workloads)
	for _, wl := range r.Report.Workloads {
		if d < len(wl.Skew) {
			ch.MaxSkew = max(ch.MaxSkew, wl.Skew[d])
		}
	}
	ch.AxisY = chartTop + chartPlotHeight
	ch.PlotRight = chartLeft + chartBarGap + max(len(workloads), 1)*(chartBarWidth+chartBarGap)
	ch.Width = ch.PlotRight + 10
	ch.Height = ch.AxisY + chartBottom
	ch.XTitleX = (chartLeft + ch.PlotRight) / 2
	ch.YTitleY = chartTop + chartPlotHeight/2
	unit := float64(chartPlotHeight) / float64(maxReplicas)
	y := func(v int) int { return ch.AxisY - int(float64(v)*unit+0.5) }
	step := (maxReplicas + 4) / 5 // at most 6 ticks
	for v := 0; v <= maxReplicas; v += step {
		ch.YTicks = append(ch.YTicks, svgTick{Pos: y(v), Label: fmt.Sprint(v)})
	}
	if last := ch.YTicks[len(ch.YTicks)-1].Label; last != fmt.Sprint(maxReplicas) {
		ch.YTicks = append(ch.YTicks, svgTick{Pos: y(maxReplicas), Label: fmt.Sprint(maxReplicas)})
	}
	every := 1
	if len(workloads) > 20 {
		every = 5
	}
	for i, wl := range workloads {
		x := chartLeft + chartBarGap + i*(chartBarWidth+chartBarGap)
		if (i+1)%every == 0 || i == 0 {
			ch.XTicks = append(ch.XTicks, svgTick{Pos: x + chartBarWidth/2, Label: fmt.Sprint(i + 1)})
		}
		if d >= len(wl.Domains) {
			continue
		}
		var doms []string
		for dom, n := range wl.Domains[d] {
			if n > 0 {
				doms = append(doms, dom)
			}
		}
		sort.Strings(doms)
		stacked := 0
		for _, dom := range doms {
			n := wl.Domains[d][dom]
			top, bottom := y(stacked+n), y(stacked)
			ch.Bars = append(ch.Bars, svgRect{
				X: x, Y: top, W: chartBarWidth, H: max(bottom-top-1, 1), Fill: color[dom], Workload: wl.Name, Domain: dom,
				Title: fmt.Sprintf("#%d %s: %d of %d replicas in %s %s", i+1, wl.Name, n, wl.Replicas, dimName, dom),
			})
			stacked += n
		}
	}
	return ch
}

// workloadDetail is the per-workload table: each workload's replicas per domain of every
// dimension and its skew there, under each mode.
type workloadDetail struct {
	Dimensions []string
	Modes      []string
	Rows       []detailRow
}

type detailRow struct {
	Index    int
	Workload string
	Replicas int
	// Cells[mode][dimension]
	Cells [][]detailCell
}

type detailCell struct {
	Text string
	Bad  bool
}

func detailOf(c *Comparison) workloadDetail {
	var det workloadDetail
	if len(c.Results) == 0 || c.Results[0].Report == nil {
		return det
	}
	for _, dim := range c.Results[0].Report.Dimensions {
		det.Dimensions = append(det.Dimensions, dim.Name)
	}
	byMode := make([]map[string]report.Workload, len(c.Results))
	var names []string
	seen := map[string]bool{}
	replicas := map[string]int{}
	for m, r := range c.Results {
		det.Modes = append(det.Modes, r.Mode)
		byMode[m] = map[string]report.Workload{}
		for _, wl := range r.Report.Workloads {
			byMode[m][wl.Name] = wl
			replicas[wl.Name] = max(replicas[wl.Name], wl.Replicas)
			if !seen[wl.Name] {
				seen[wl.Name] = true
				names = append(names, wl.Name)
			}
		}
	}
	for i, name := range names {
		row := detailRow{Index: i + 1, Workload: name, Replicas: replicas[name]}
		for m := range c.Results {
			cells := make([]detailCell, len(det.Dimensions))
			wl, ok := byMode[m][name]
			for d := range det.Dimensions {
				if !ok || d >= len(wl.Domains) {
					cells[d] = detailCell{Text: "-"}
					continue
				}
				var doms []string
				for dom := range wl.Domains[d] {
					doms = append(doms, dom)
				}
				sort.Strings(doms)
				parts := make([]string, len(doms))
				for j, dom := range doms {
					parts[j] = fmt.Sprintf("%s:%d", dom, wl.Domains[d][dom])
				}
				skew := 0
				if d < len(wl.Skew) {
					skew = wl.Skew[d]
				}
				cells[d] = detailCell{Text: fmt.Sprintf("%s (skew %d)", strings.Join(parts, " "), skew), Bad: skew > 1}
			}
			row.Cells = append(row.Cells, cells)
		}
		det.Rows = append(det.Rows, row)
	}
	return det
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"plus":  func(a, b int) int { return a + b },
	"minus": func(a, b int) int { return a - b },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pool-scheduler simulation</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}
td.bad{background:#fde2e1;font-weight:bold}td.ok{background:#e3f4e1}
.charts{display:flex;gap:2em;flex-wrap:wrap;align-items:flex-start}figure{margin:0}
figcaption{font-weight:bold;margin-bottom:4px}
svg{background:#fafafa;font-size:11px}svg text{fill:#444}
.axis line,.axis path{stroke:#666}.grid line{stroke:#e4e4e4}
ul.legend{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px;max-width:60em}
ul.legend li{display:flex;align-items:center;gap:5px}.swatch{display:inline-block;width:12px;height:12px}
details{margin:1em 0}table.detail td{font-family:ui-monospace,monospace;font-size:12px}
</style></head><body>
<h1>pool-scheduler vs the default scheduler</h1>
<p>Each scenario ran twice on an embedded control plane with the real scheduler: once with the default profile, once with pool-scheduler's shipped profile.</p>
{{range $sec := .}}
<section id="{{.Scenario}}">
<h2>{{.Scenario}}</h2><p>{{.Description}}</p>
<table><tr><th>metric</th>{{range .Modes}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Label}}</td>{{range .Cells}}<td class="{{if .Violation}}bad{{else}}ok{{end}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>
{{if .Timelines}}
<h3>Ready replicas over the maintenance</h3>
<p>One chart per workload: its Ready replicas (not terminating and Ready) over the maintenance's simulated minutes, one line per mode; the dashed line is its floor, two thirds of its replicas rounded up.</p>
<ul class="legend" data-timeline-legend="">{{range .TimelineLegend}}<li><span class="swatch" style="background:{{.Color}}"></span>{{.Domain}}</li>{{end}}</ul>
<div class="charts">{{range $t := .Timelines}}<figure><figcaption>{{.Workload}} ({{.Replicas}}; min {{range $i, $m := .MinReady}}{{if $i}}, {{end}}{{$m}}{{end}})</figcaption>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" role="img" data-timeline="{{.Workload}}" aria-label="{{.Workload}}: Ready replicas over the maintenance">
<g class="grid">{{range .YTicks}}<line x1="{{$t.PlotLeft}}" x2="{{$t.PlotRight}}" y1="{{.Pos}}" y2="{{.Pos}}"/>{{end}}</g>
{{if .Floor}}<line class="floor" x1="{{.PlotLeft}}" x2="{{.PlotRight}}" y1="{{.FloorY}}" y2="{{.FloorY}}" stroke="#e15759" stroke-dasharray="4 3"/>{{end}}
{{range .Lines}}<polyline class="ready" fill="none" stroke="{{.Color}}" stroke-width="1.5" data-mode="{{.Mode}}" points="{{.Points}}"/>
{{end}}<g class="axis y-axis"><line x1="{{.PlotLeft}}" x2="{{.PlotLeft}}" y1="{{.PlotTop}}" y2="{{.AxisY}}"/>{{range .YTicks}}<text x="{{minus $t.PlotLeft 5}}" y="{{plus .Pos 4}}" text-anchor="end">{{.Label}}</text>{{end}}</g>
<g class="axis x-axis"><line x1="{{.PlotLeft}}" x2="{{.PlotRight}}" y1="{{.AxisY}}" y2="{{.AxisY}}"/>{{range .XTicks}}<text x="{{.Pos}}" y="{{plus $t.AxisY 13}}" text-anchor="middle">{{.Label}}</text>{{end}}
<text x="{{plus $t.PlotLeft 120}}" y="{{plus .AxisY 25}}" text-anchor="middle">simulated minutes</text></g>
</svg></figure>{{end}}</div>
{{end}}
{{range $dim := .Dimensions}}
<h3>Replicas per {{$dim.Name}} <small>({{$dim.Keys}})</small></h3>
<p>Each bar is one workload (numbered as in the detail below), its replicas stacked by {{$dim.Name}}, one colour per {{$dim.Name}}: equal segments in a bar mean the workload is spread evenly.</p>
<div class="charts">{{range $c := .Charts}}<figure><figcaption>{{.Mode}}: max skew {{.MaxSkew}}{{if lt .Shown .Workloads}} (first {{.Shown}} of {{.Workloads}} workloads){{end}}</figcaption>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" role="img" data-dimension="{{$dim.Name}}" data-mode="{{.Mode}}" aria-label="{{.Mode}}: replicas per {{$dim.Name}}, per workload">
<g class="grid">{{range .YTicks}}<line x1="{{$c.PlotLeft}}" x2="{{$c.PlotRight}}" y1="{{.Pos}}" y2="{{.Pos}}"/>{{end}}</g>
{{range .Bars}}<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Fill}}" data-workload="{{.Workload}}" data-domain="{{.Domain}}"><title>{{.Title}}</title></rect>
{{end}}<g class="axis y-axis"><line x1="{{.PlotLeft}}" x2="{{.PlotLeft}}" y1="{{.PlotTop}}" y2="{{.AxisY}}"/>{{range .YTicks}}<line x1="{{$c.PlotLeft}}" x2="{{minus $c.PlotLeft 4}}" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="{{minus $c.PlotLeft 7}}" y="{{plus .Pos 4}}" text-anchor="end">{{.Label}}</text>{{end}}
<text transform="translate(11,{{.YTitleY}}) rotate(-90)" text-anchor="middle">replicas</text></g>
<g class="axis x-axis"><line x1="{{.PlotLeft}}" x2="{{.PlotRight}}" y1="{{.AxisY}}" y2="{{.AxisY}}"/>{{range .XTicks}}<text x="{{.Pos}}" y="{{plus $c.AxisY 14}}" text-anchor="middle">{{.Label}}</text>{{end}}
<text x="{{.XTitleX}}" y="{{plus .AxisY 29}}" text-anchor="middle">workload</text></g>
</svg></figure>{{end}}</div>
<ul class="legend" data-dimension="{{$dim.Name}}">{{range .Legend}}<li><span class="swatch" style="background:{{.Color}}"></span>{{$dim.Name}} {{.Domain}}</li>{{end}}{{if .Repeats}}<li>(colours repeat in this order)</li>{{end}}</ul>
{{end}}
<details><summary>Per-workload detail: replicas per domain and skew, each dimension, each mode ({{len .Detail.Rows}} workloads)</summary>
<table class="detail"><tr><th>#</th><th>workload</th><th>replicas</th>{{range $m := .Detail.Modes}}{{range $sec.Detail.Dimensions}}<th>{{$m}}: {{.}}</th>{{end}}{{end}}</tr>
{{range .Detail.Rows}}<tr><td>{{.Index}}</td><td>{{.Workload}}</td><td>{{.Replicas}}</td>{{range .Cells}}{{range .}}<td class="{{if .Bad}}bad{{else}}ok{{end}}">{{.Text}}</td>{{end}}{{end}}</tr>
{{end}}</table></details>
</section>
{{end}}
</body></html>
`))
