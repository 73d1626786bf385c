package simulate

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
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
	return append(out, rows...)
}

var rows = []row{
	{label: "pods bound / created", value: func(r *Result) string { return fmt.Sprintf("%d / %d", r.Bound, r.Pods) }},
	{label: "pods pending (reason)", value: func(r *Result) string { return pendingSummary(r) }},
	{label: "label-to-bind latency p50 / p99", value: func(r *Result) string {
		return fmt.Sprintf("%s / %s", ms(r.LabelToBindP50), ms(r.LabelToBindP99))
	}},
	{label: "scheduling throughput", value: func(r *Result) string { return fmt.Sprintf("%.0f pods/s", r.Throughput) }},
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

// WriteTable prints the side-by-side comparison of every scenario.
func WriteTable(w io.Writer, comparisons []*Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range comparisons {
		fmt.Fprintf(tw, "\nSCENARIO %s\t", c.Scenario)
		for _, r := range c.Results {
			fmt.Fprintf(tw, "%s\t", strings.ToUpper(r.Mode))
		}
		fmt.Fprintln(tw)
		for _, row := range rowsFor(c) {
			fmt.Fprintf(tw, "  %s\t", row.label)
			for _, r := range c.Results {
				fmt.Fprintf(tw, "%s\t", row.value(r))
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

// WriteJSON writes the comparisons as JSON.
func WriteJSON(w io.Writer, comparisons []*Comparison) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(comparisons)
}

// Violations sums the violation rows of a result.
func Violations(r *Result) int {
	n := len(r.Report.PodsOnNotReadyNodes) + len(r.Report.UserPodsOnSystemNodes) + len(r.Report.LoadBalancerMismatches) + skewed(r)
	for d := range r.Report.Dimensions {
		n += r.Report.ConfinedWorkloads(d)
	}
	return n
}

// WriteHTML writes a self-contained page: the table, and per scenario a bar chart (inline SVG)
// of each workload's replicas per update domain under each mode.
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
		Charts                []svgChart
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
				tr.Cells = append(tr.Cells, cell{Text: v, Violation: rw.violation && v != "0"})
			}
			s.Rows = append(s.Rows, tr)
		}
		for _, r := range c.Results {
			s.Charts = append(s.Charts, spreadChart(r))
		}
		sections = append(sections, s)
	}
	return htmlTemplate.Execute(w, sections)
}

type svgBar struct {
	X, Y, W, H int
	Label      string
}

type svgChart struct {
	Mode          string
	Width, Height int
	Bars          []svgBar
}

// spreadChart draws, per workload (the first 40), a stacked bar of its replicas per update domain.
func spreadChart(r *Result) svgChart {
	out := svgChart{Mode: r.Mode, Height: 140}
	const barW, gap, unit = 10, 4, 14
	workloads := r.Report.Workloads
	if len(workloads) > 40 {
		workloads = workloads[:40]
	}
	for i, wl := range workloads {
		x := 10 + i*(barW+gap)
		y := out.Height - 10
		var domains []string
		if len(wl.Domains) > 1 {
			for d := range wl.Domains[1] {
				domains = append(domains, d)
			}
		}
		sort.Strings(domains)
		for _, d := range domains {
			h := wl.Domains[1][d] * unit
			y -= h
			out.Bars = append(out.Bars, svgBar{X: x, Y: y, W: barW, H: h - 1, Label: fmt.Sprintf("%s: update domain %s: %d", wl.Name, d, wl.Domains[1][d])})
		}
	}
	out.Width = 20 + len(workloads)*(barW+gap)
	return out
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"color": func(label string) string {
		palette := []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948"}
		i := strings.LastIndex(label, "update domain ")
		if i < 0 {
			return palette[0]
		}
		var d int
		fmt.Sscanf(label[i+len("update domain "):], "%d", &d)
		return palette[d%len(palette)]
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pool-scheduler simulation</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}
td.bad{background:#fde2e1;font-weight:bold}td.ok{background:#e3f4e1}
.charts{display:flex;gap:2em;flex-wrap:wrap}figure{margin:0}svg{border:1px solid #ddd;background:#fafafa}
</style></head><body>
<h1>pool-scheduler vs the default scheduler</h1>
<p>Each scenario ran twice on an embedded control plane with the real scheduler: once with the default profile, once with pool-scheduler's shipped profile.</p>
{{range .}}
<section id="{{.Scenario}}">
<h2>{{.Scenario}}</h2><p>{{.Description}}</p>
<table><tr><th>metric</th>{{range .Modes}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Label}}</td>{{range .Cells}}<td class="{{if .Violation}}bad{{else}}ok{{end}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>
<h3>Replicas per update domain, per workload (each bar one workload, each colour one update domain)</h3>
<div class="charts">{{range .Charts}}<figure><figcaption>{{.Mode}}</figcaption>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" role="img" aria-label="{{.Mode}} update-domain spread">
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{color .Label}}"><title>{{.Label}}</title></rect>
{{end}}</svg></figure>{{end}}</div>
</section>
{{end}}
</body></html>
`))
