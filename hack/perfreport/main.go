// Command perfreport turns scheduler_perf result files (BenchmarkPerfScheduling_*.json) and the
// plugins' Go benchmark output into docs/performance.md tables: pods/s and attempt latency per
// test case, and the ratios of pool-scheduler to every other case of the same workload.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
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
	filter, score []float64
}

func main() {
	dir := flag.String("artifacts", "artifacts", "directory with BenchmarkPerfScheduling_*.json")
	flag.Parse()
	files, _ := filepath.Glob(filepath.Join(*dir, "BenchmarkPerfScheduling_*.json"))
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "no BenchmarkPerfScheduling_*.json in %s\n", *dir)
		os.Exit(1)
	}
	// results[workload][case]
	results := map[string]map[string]*result{}
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
			case it.Labels["Metric"] == "scheduler_framework_extension_point_duration_seconds" && it.Labels["extension_point"] == "Filter":
				r.filter = append(r.filter, it.Data["Average"])
			case it.Labels["Metric"] == "scheduler_framework_extension_point_duration_seconds" && it.Labels["extension_point"] == "Score":
				r.score = append(r.score, it.Data["Average"])
			}
		}
	}
	order := []string{"floor", "default", "intree-equivalent", "anti-affinity", "pool-scheduler"}
	var workloads []string
	for w := range results {
		workloads = append(workloads, w)
	}
	sort.Strings(workloads)
	for _, w := range workloads {
		fmt.Printf("\n### %s\n\n| test case | pods/s (mean of runs) | runs | attempt latency p50 | p99 | Filter per cycle (mean) | Score per cycle (mean) |\n|---|---|---|---|---|---|---|\n", w)
		for _, tc := range order {
			r := results[w][tc]
			if r == nil {
				continue
			}
			fmt.Printf("| %s | %.1f | %d | %s | %s | %s | %s |\n", tc, mean(r.throughput), len(r.throughput), ms(mean(r.p50), r.p50), ms(mean(r.p99), r.p99),
				ms(mean(r.filter), r.filter), ms(mean(r.score), r.score))
		}
		ps := results[w]["pool-scheduler"]
		if ps == nil {
			continue
		}
		fmt.Printf("\n| ratio (pods/s) | of the means | per run (same run, in run order) |\n|---|---|---|\n")
		for _, tc := range []string{"default", "intree-equivalent", "anti-affinity", "floor"} {
			if other := results[w][tc]; other != nil && mean(other.throughput) > 0 {
				fmt.Printf("| pool-scheduler / %s | %.2f | %s |\n", tc, mean(ps.throughput)/mean(other.throughput), perRun(ps.throughput, other.throughput))
			}
		}
	}
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
