// Command perfreport turns scheduler_perf result files (BenchmarkPerfScheduling_*.json) and the
// plugins' Go benchmark output into docs/performance.md tables: pods/s and attempt latency per
// test case, and the ratios of pool-scheduler's cases to every other case of the same family and
// workload. A family is the cases that differ only in their scheduler: "pools-pinned-default" and
// "pools-pinned-pool-scheduler" are family "pools-pinned-"; the suite's first cases ("default",
// "pool-scheduler", "pool-scheduler-admitted", ...) are family "".
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

type result struct {
	throughput []float64
	p50, p99   []float64
	// Average time per scheduling cycle of the Filter and Score extension points (all plugins,
	// parallel over nodes): where the cases' cycles differ.
	prefilter, filter, score []float64
}

func main() {
	dir := flag.String("artifacts", "artifacts", "directory with BenchmarkPerfScheduling_*.json")
	width := flag.Float64("converged", 0, "exit 3 unless the 95% interval of every pool-scheduler / default ratio is at most this wide (make bench: run pairs until it is); 0: always exit 0")
	flag.Parse()
	files, _ := filepath.Glob(filepath.Join(*dir, "BenchmarkPerfScheduling_*.json"))
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "no BenchmarkPerfScheduling_*.json in %s\n", *dir)
		os.Exit(1)
	}
	// results[workload][case]
	results := map[string]map[string]*result{}
	var unconverged []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var doc struct {
			DataItems []dataItem `json:"dataItems"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			os.Exit(1)
		}
		for _, it := range doc.DataItems {
			parts := strings.Split(it.Labels["Name"], "/")
			if len(parts) < 3 {
				continue
			}
			tc, workload := parts[1], parts[2]
			if results[workload] == nil {
				results[workload] = map[string]*result{}
			}
			r := results[workload][tc]
			if r == nil {
				r = &result{}
				results[workload][tc] = r
			}
			switch {
			case it.Labels["Metric"] == "SchedulingThroughput":
				r.throughput = append(r.throughput, it.Data["Average"])
			case it.Labels["Metric"] == "scheduler_scheduling_attempt_duration_seconds" && it.Labels["result"] == "scheduled":
				r.p50 = append(r.p50, it.Data["Perc50"])
				r.p99 = append(r.p99, it.Data["Perc99"])
			case it.Labels["Metric"] == "scheduler_framework_extension_point_duration_seconds" && it.Labels["extension_point"] == "PreFilter":
				r.prefilter = append(r.prefilter, it.Data["Average"])
			case it.Labels["Metric"] == "scheduler_framework_extension_point_duration_seconds" && it.Labels["extension_point"] == "Filter":
				r.filter = append(r.filter, it.Data["Average"])
			case it.Labels["Metric"] == "scheduler_framework_extension_point_duration_seconds" && it.Labels["extension_point"] == "Score":
				r.score = append(r.score, it.Data["Average"])
			}
		}
	}
	var workloads []string
	for w := range results {
		workloads = append(workloads, w)
	}
	sort.Strings(workloads)
	for _, w := range workloads {
		fmt.Printf("\n### %s\n\n| test case | pods/s (mean of runs) | runs | attempt latency p50 | p99 | PreFilter per cycle (mean) | Filter per cycle (mean) | Score per cycle (mean) |\n|---|---|---|---|---|---|---|---|\n", w)
		families := familiesOf(results[w])
		for _, f := range families {
			for _, tc := range f.cases {
				r := results[w][tc]
				fmt.Printf("| %s | %.1f | %d | %s | %s | %s | %s | %s |\n", tc, mean(r.throughput), len(r.throughput), ms(mean(r.p50), r.p50), ms(mean(r.p99), r.p99),
					ms(mean(r.prefilter), r.prefilter), ms(mean(r.filter), r.filter), ms(mean(r.score), r.score))
			}
		}
		var rows []string
		for _, r := range ratiosOf(families, results[w]) {
			a, b := results[w][r.ours], results[w][r.other]
			rows = append(rows, fmt.Sprintf("| %s / %s | %.2f | %s | %s |", r.ours, r.other, mean(a.throughput)/mean(b.throughput), r.iv, perRun(a.throughput, b.throughput)))
			if *width > 0 && r.againstDefault && !r.iv.within(*width) {
				unconverged = append(unconverged, fmt.Sprintf("%s %s / %s: %s", w, r.ours, r.other, r.iv))
			}
		}
		if len(rows) > 0 {
			fmt.Printf("\n| ratio (pods/s) | of the means | per pair: geometric mean [95%% interval] | per run (same run, in run order) |\n|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
		}
	}
	if len(unconverged) > 0 {
		fmt.Fprintf(os.Stderr, "intervals wider than %.2f: %s\n", *width, strings.Join(unconverged, "; "))
		os.Exit(3)
	}
}

// ratio is one of pool-scheduler's cases against another case of its family.
type ratio struct {
	ours, other string
	// againstDefault: other is the family's default-scheduler case (the goals' pair).
	againstDefault bool
	iv             interval
}

// ratiosOf pairs every pool-scheduler case of each family with the family's other cases that
// have a throughput.
func ratiosOf(families []family, results map[string]*result) []ratio {
	var out []ratio
	for _, f := range families {
		for _, ours := range f.cases {
			if !isOurs(f.name, ours) {
				continue
			}
			for _, other := range f.cases {
				if isOurs(f.name, other) || mean(results[other].throughput) <= 0 {
					continue
				}
				out = append(out, ratio{ours: ours, other: other, againstDefault: strings.TrimPrefix(other, f.name) == "default",
					iv: pairInterval(results[ours].throughput, results[other].throughput)})
			}
		}
	}
	return out
}

// within: the interval is known (two pairs or more) and at most width wide.
func (iv interval) within(width float64) bool { return iv.n >= 2 && iv.hi-iv.lo <= width }

// interval is the ratio of two cases' throughputs judged pair by pair: the geometric mean of the
// per-run ratios and its 95% confidence interval (Student's t on the logs: a ratio's error is
// multiplicative), over n pairs.
type interval struct {
	gm, lo, hi float64
	n          int
}

func (iv interval) String() string {
	switch {
	case iv.n == 0:
		return "-"
	case iv.n == 1:
		return fmt.Sprintf("%.2f (1 pair: no interval)", iv.gm)
	}
	return fmt.Sprintf("%.2f [%.2f, %.2f], %d pairs", iv.gm, iv.lo, iv.hi, iv.n)
}

// pairInterval pairs run i of a with run i of b (perRun says why that is a pair) and returns
// the interval of their ratio; runs with no throughput on either side are left out.
func pairInterval(a, b []float64) interval {
	var logs []float64
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] > 0 && b[i] > 0 {
			logs = append(logs, math.Log(a[i]/b[i]))
		}
	}
	n := len(logs)
	if n == 0 {
		return interval{}
	}
	m := mean(logs)
	if n == 1 {
		return interval{gm: math.Exp(m), lo: math.Exp(m), hi: math.Exp(m), n: 1}
	}
	ss := 0.0
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	half := tQuantile975(n-1) * math.Sqrt(ss/float64(n-1)/float64(n))
	return interval{gm: math.Exp(m), lo: math.Exp(m - half), hi: math.Exp(m + half), n: n}
}

// t975 are Student's t distribution's 97.5% quantiles for 1 to 30 degrees of freedom (any
// statistics table; scipy.stats.t.ppf(0.975, df)).
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile975 is t975 for df <= 30, and beyond it the Cornish-Fisher expansion around the
// normal quantile 1.96 (within 0.001 of the exact value there).
func tQuantile975(df int) float64 {
	if df >= 1 && df <= len(t975) {
		return t975[df-1]
	}
	const z = 1.959964
	d := float64(df)
	return z + (z*z*z+z)/(4*d) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*d*d)
}

// schedulers orders a family's cases: the baselines first, pool-scheduler's cases last.
var schedulers = []string{"floor", "default", "intree-equivalent", "anti-affinity", "degraded-affinity", "degraded", "pool-scheduler"}

type family struct {
	name  string
	cases []string
}

// familiesOf groups a workload's cases by family (the case name before its scheduler part), in
// name order, and orders each family's cases by schedulers (unknown suffixes after them, by name).
func familiesOf(cases map[string]*result) []family {
	byName := map[string][]string{}
	for tc := range cases {
		f := familyOf(tc)
		byName[f] = append(byName[f], tc)
	}
	var out []family
	for name, tcs := range byName {
		rank := func(tc string) int {
			rest := strings.TrimPrefix(tc, name)
			for i, s := range schedulers {
				if rest == s {
					return i
				}
			}
			for i, s := range schedulers {
				if strings.HasPrefix(rest, s+"-") {
					return i
				}
			}
			return len(schedulers)
		}
		sort.Slice(tcs, func(i, j int) bool {
			if ri, rj := rank(tcs[i]), rank(tcs[j]); ri != rj {
				return ri < rj
			}
			return tcs[i] < tcs[j]
		})
		out = append(out, family{name: name, cases: tcs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// familyOf is the part of a case name before its scheduler: the longest prefix ending in "-"
// that is followed by one of schedulers ("pools-pinned-pool-scheduler": "pools-pinned-"), or
// "" ("default", "pool-scheduler-admitted").
func familyOf(tc string) string {
	for i := len(tc) - 1; i > 0; i-- {
		if tc[i-1] != '-' {
			continue
		}
		for _, s := range schedulers {
			if tc[i:] == s || strings.HasPrefix(tc[i:], s+"-") {
				return tc[:i]
			}
		}
	}
	return ""
}

// isOurs: the case runs pool-scheduler's profile ("pool-scheduler", "pool-scheduler-admitted").
func isOurs(family, tc string) bool {
	rest := strings.TrimPrefix(tc, family)
	return rest == "pool-scheduler" || strings.HasPrefix(rest, "pool-scheduler-")
}

// perRun lists the ratio of run i of a to run i of b. Results are read in the order of their
// files' timestamps, and make bench runs every case once per run, so index i is run i of both.
func perRun(a, b []float64) string {
	var out []string
	for i := 0; i < len(a) && i < len(b); i++ {
		if b[i] > 0 {
			out = append(out, fmt.Sprintf("%.2f", a[i]/b[i]))
		}
	}
	if len(a) != len(b) {
		out = append(out, fmt.Sprintf("(unpaired: %d against %d runs)", len(a), len(b)))
	}
	return strings.Join(out, ", ")
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// ms renders a duration; scheduler_perf reports these metrics in milliseconds.
func ms(v float64, samples []float64) string {
	if len(samples) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", v)
}
