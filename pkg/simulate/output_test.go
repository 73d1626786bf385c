package simulate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

// node helpers over golang.org/x/net/html's tree.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func element(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == name }
}

func withClass(name, class string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		return element(name)(n) && strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
	}
}

func text(n *html.Node) string {
	var b strings.Builder
	for _, t := range findAll(n, func(n *html.Node) bool { return n.Type == html.TextNode }) {
		b.WriteString(t.Data)
	}
	return b.String()
}

// labels lists the SVG <text> elements' contents in document order.
func labels(n *html.Node) []string {
	var out []string
	for _, t := range findAll(n, element("text")) {
		out = append(out, text(t))
	}
	return out
}

func result(mode string, workloads ...report.Workload) *Result {
	return &Result{Mode: mode, Report: &report.Report{
		Dimensions: []report.Dimension{{Name: "zone", Keys: []string{"topology.kubernetes.io/zone"}}, {Name: "host", Keys: []string{"kubernetes.io/hostname"}}},
		Workloads:  workloads,
	}}
}

// TestWriteHTMLCharts: every spread dimension gets a chart per mode with a y axis (replicas,
// from 0 to the largest workload, shared by the modes) and an x axis (workloads), one bar
// segment per workload and domain holding replicas, sized by them, a legend naming every domain
// of the dimension with its colour, and a detail row per workload with its domains and skew.
func TestWriteHTMLCharts(t *testing.T) {
	c := &Comparison{Scenario: "s", Results: []*Result{
		result("default",
			report.Workload{Name: "ns/replicaset/a", Replicas: 4, Domains: []map[string]int{{"z0": 4}, {"h0": 3, "h1": 1}}, Skew: []int{4, 3}},
			report.Workload{Name: "ns/replicaset/b", Replicas: 2, Domains: []map[string]int{{"z0": 1, "z1": 1}, {"h1": 2}}, Skew: []int{0, 2}}),
		result("pool-scheduler",
			report.Workload{Name: "ns/replicaset/a", Replicas: 4, Domains: []map[string]int{{"z0": 2, "z1": 2}, {"h0": 2, "h1": 2}}, Skew: []int{0, 0}},
			report.Workload{Name: "ns/replicaset/b", Replicas: 2, Domains: []map[string]int{{"z0": 1, "z1": 1}, {"h0": 1, "h1": 1}}, Skew: []int{0, 0}}),
	}}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, []*Comparison{c}); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	svgs := findAll(doc, element("svg"))
	var charts []string
	for _, svg := range svgs {
		charts = append(charts, attr(svg, "data-dimension")+"/"+attr(svg, "data-mode"))
	}
	if diff := cmp.Diff([]string{"zone/default", "zone/pool-scheduler", "host/default", "host/pool-scheduler"}, charts); diff != "" {
		t.Fatalf("charts (-want +got):\n%s", diff)
	}
	for i, svg := range svgs {
		t.Run(charts[i], func(t *testing.T) {
			yAxis := findAll(svg, withClass("g", "y-axis"))
			xAxis := findAll(svg, withClass("g", "x-axis"))
			if len(yAxis) != 1 || len(xAxis) != 1 {
				t.Fatalf("%d y axes, %d x axes", len(yAxis), len(xAxis))
			}
			if diff := cmp.Diff([]string{"0", "1", "2", "3", "4", "replicas"}, labels(yAxis[0])); diff != "" {
				t.Errorf("y axis labels: ticks 0 to the largest workload, then the title (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"1", "2", "workload"}, labels(xAxis[0])); diff != "" {
				t.Errorf("x axis labels: the workloads' numbers, then the title (-want +got):\n%s", diff)
			}
			// Bars: one segment per (workload, domain) with replicas; heights proportional.
			height := map[string]int{}
			for _, r := range findAll(svg, withClass("rect", "bar")) {
				var h int
				fmt.Sscan(attr(r, "height"), &h)
				height[attr(r, "data-workload")+"@"+attr(r, "data-domain")] = h + 1 // segments leave a 1px gap
			}
			want := map[string]map[string]int{
				"zone/default":        {"ns/replicaset/a@z0": 4, "ns/replicaset/b@z0": 1, "ns/replicaset/b@z1": 1},
				"zone/pool-scheduler": {"ns/replicaset/a@z0": 2, "ns/replicaset/a@z1": 2, "ns/replicaset/b@z0": 1, "ns/replicaset/b@z1": 1},
				"host/default":        {"ns/replicaset/a@h0": 3, "ns/replicaset/a@h1": 1, "ns/replicaset/b@h1": 2},
				"host/pool-scheduler": {"ns/replicaset/a@h0": 2, "ns/replicaset/a@h1": 2, "ns/replicaset/b@h0": 1, "ns/replicaset/b@h1": 1},
			}[charts[i]]
			if len(height) != len(want) {
				t.Errorf("segments %v, want %v", height, want)
			}
			for k, n := range want {
				h, ok := height[k]
				if !ok {
					t.Errorf("no segment for %s", k)
					continue
				}
				// 150 px for 4 replicas: 37.5 px each, rounded.
				if wantH := int(float64(n)*150/4 + 0.5); h < wantH-1 || h > wantH+1 {
					t.Errorf("segment %s is %d px, want ~%d for %d replicas", k, h, wantH, n)
				}
			}
		})
	}
	var legends []string
	for _, ul := range findAll(doc, withClass("ul", "legend")) {
		var items []string
		for _, li := range findAll(ul, element("li")) {
			sw := findAll(li, withClass("span", "swatch"))
			if len(sw) != 1 || !strings.Contains(attr(sw[0], "style"), "background:#") {
				t.Errorf("legend item %q has no colour swatch", text(li))
			}
			items = append(items, text(li))
		}
		legends = append(legends, attr(ul, "data-dimension")+": "+strings.Join(items, ", "))
	}
	if diff := cmp.Diff([]string{"zone: zone z0, zone z1", "host: host h0, host h1"}, legends); diff != "" {
		t.Errorf("legends (-want +got):\n%s", diff)
	}
	detail := findAll(doc, withClass("table", "detail"))
	if len(detail) != 1 {
		t.Fatalf("%d detail tables", len(detail))
	}
	var rows []string
	for _, tr := range findAll(detail[0], element("tr"))[1:] {
		var cells []string
		for _, td := range findAll(tr, element("td")) {
			cells = append(cells, text(td))
		}
		rows = append(rows, strings.Join(cells, " | "))
	}
	wantRows := []string{
		"1 | ns/replicaset/a | 4 | z0:4 (skew 4) | h0:3 h1:1 (skew 3) | z0:2 z1:2 (skew 0) | h0:2 h1:2 (skew 0)",
		"2 | ns/replicaset/b | 2 | z0:1 z1:1 (skew 0) | h1:2 (skew 2) | z0:1 z1:1 (skew 0) | h0:1 h1:1 (skew 0)",
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("detail rows (-want +got):\n%s", diff)
	}
}

// TestWriteTableDomainsPerPool: the table says, per pool, each dimension's distinct domains and
// which dimensions cannot spread the pool (one value for all its nodes; a pool of one node is
// not marked).
func TestWriteTableDomainsPerPool(t *testing.T) {
	r := result("pool-scheduler")
	r.Report.Domains = []report.PoolDomains{
		{Pool: "userpool", Nodes: 6, Dimensions: []report.DimensionValues{{Name: "zone", Distinct: 1}, {Name: "host", Distinct: 6}}},
		{Pool: "zonal", Nodes: 3, Dimensions: []report.DimensionValues{{Name: "zone", Distinct: 3}, {Name: "host", Distinct: 3}}},
		{Pool: "single", Nodes: 1, Dimensions: []report.DimensionValues{{Name: "zone", Distinct: 1}, {Name: "host", Distinct: 1}}},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, []*Comparison{{Scenario: "s", Results: []*Result{r}}}); err != nil {
		t.Fatal(err)
	}
	var got string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, "domains per pool") {
			got = strings.Join(strings.Fields(line), " ")
		}
	}
	want := "domains per pool: zone / host userpool 1/6 (zone not spread); zonal 3/3; single 1/1"
	if got != want {
		t.Errorf("domains row = %q, want %q\n%s", got, want, b.String())
	}
}

// TestWriteTableFitsTheTerminal: for every built-in scenario, with the widest cells its results
// can have (every pool in the domains row with every dimension flat, pods pending for every
// reason the scheduler gives, the largest counts), no line of the table is wider than
// TableWidth, and the wrapped cells still say everything: each pool and each pending reason.
func TestWriteTableFitsTheTerminal(t *testing.T) {
	reasons := []string{
		"0/40 nodes are available: 12 node(s) didn't match Pod's node affinity/selector, 8 node(s) had untolerated taint {CriticalAddonsOnly: true}. preemption: 0/40 nodes are available.",
		"0/40 nodes are available: 40 node(s) were held by NodePoolReady: pool userpool label example.com/lifecycle missing.",
		"0/40 nodes are available: 40 Insufficient cpu.",
	}
	for _, name := range BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			sc, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			dims := []report.Dimension{{Name: "zone"}, {Name: "update-domain"}, {Name: "host"}}
			wide := func(mode string) *Result {
				r := &Result{Mode: mode, Pods: 123456, Bound: 123456, LabelToBindP50: 123456789, LabelToBindP99: 987654321, Throughput: 12345, OptedIn: 12345,
					Report: &report.Report{Dimensions: dims}}
				for _, p := range sc.Pools {
					pd := report.PoolDomains{Pool: p.Name, Nodes: 1000}
					for _, d := range dims {
						pd.Dimensions = append(pd.Dimensions, report.DimensionValues{Name: d.Name, Distinct: 1})
					}
					r.Report.Domains = append(r.Report.Domains, pd)
				}
				for i := range 1000 {
					r.Report.PendingPods = append(r.Report.PendingPods, report.Finding{Object: fmt.Sprintf("ns/pod-%d", i), Detail: reasons[i%len(reasons)]})
				}
				if sc.Maintenance != nil {
					r.Maintenance = &aksemu.Result{Outcome: aksemu.OutcomeFailed, Replicas: 123456, Evictions: 1234567, Refusals: 12345678, EvictionsPerReplica: 1234.56,
						RefusalsPerReplica: 12345.67, BelowFloor: 123456, Minutes: 1234567, NewNodes: make([]string, 1000), RemovedNodes: make([]string, 5000), ReimagedNodes: make([]string, 5000),
						QuarantinedNodes: make([]string, 1000), Workloads: []aksemu.MaintainedWorkload{{Name: "a-namespace-name/replicaset/" + strings.Repeat("w", 63), Replicas: 1000, MinReady: 1}}}
				}
				return r
			}
			c := &Comparison{Scenario: sc.Name, Results: []*Result{wide("default"), wide("pool-scheduler")}}
			var b bytes.Buffer
			if err := WriteTable(&b, []*Comparison{c}); err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(b.String(), "\n") {
				if len(line) > TableWidth {
					t.Errorf("line %d is %d columns wide, more than %d:\n%s", i+1, len(line), TableWidth, line)
				}
			}
			// What the wrapped cells say, read with one value column (with two, a flattened line
			// interleaves them).
			var one bytes.Buffer
			if err := WriteTable(&one, []*Comparison{{Scenario: sc.Name, Results: []*Result{wide("pool-scheduler")}}}); err != nil {
				t.Fatal(err)
			}
			flat := strings.Join(strings.Fields(one.String()), " ")
			for _, p := range sc.Pools {
				if !strings.Contains(flat, p.Name+" 1/1/1 (zone, update-domain, host not spread)") {
					t.Errorf("the table lost pool %s's domains:\n%s", p.Name, one.String())
				}
			}
			for _, reason := range reasons {
				if want := shortReason(reason); !strings.Contains(flat, want) {
					t.Errorf("the table lost the pending reason %q:\n%s", want, one.String())
				}
			}
			if testing.Verbose() {
				t.Logf("\n%s", b.String())
			}
		})
	}
}

// TestWrapCell: a cell wraps after "; " between items, else at a space, else anywhere, and
// loses no character but the spaces it breaks at.
func TestWrapCell(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		width int
		want  []string
	}{
		{name: "fits", text: "userpool 3/3/6", width: 20, want: []string{"userpool 3/3/6"}},
		{name: "between items", text: "userpool 3/3/6; system 1/3/3", width: 20, want: []string{"userpool 3/3/6;", "system 1/3/3"}},
		{name: "at a space", text: "system 1/3/3 (zone not spread)", width: 20, want: []string{"system 1/3/3 (zone", "not spread)"}},
		{name: "anywhere", text: "abcdefghijkl", width: 5, want: []string{"abcde", "fghij", "kl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, wrapCell(tt.text, tt.width)); diff != "" {
				t.Errorf("wrapCell(%q, %d) (-want +got):\n%s", tt.text, tt.width, diff)
			}
		})
	}
}
