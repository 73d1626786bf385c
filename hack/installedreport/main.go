// Command installedreport turns the output of test/installed's BenchmarkInstalled (go test
// -bench, read from stdin) into the markdown tables of docs/performance.md: per workload and
// scheduler, pods/s and the p50/p99 of create-to-bind latency, and the ratios the benchmark
// reports; each the mean over the runs (-count) in the output.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// variants in the order of the table; the benchmark reports "<variant>-pods/s" and so on.
var variants = []string{"default-unthrottled", "pool-scheduler", "pool-scheduler-unthrottled", "default"}

// ratios the benchmark reports as "ratio-<a>/<b>", with what each one says.
var ratios = []struct{ unit, label string }{
	{"ratio-pool-scheduler/default-unthrottled", "pool-scheduler / default-unthrottled (goal >= 0.9)"},
	{"ratio-pool-scheduler/default", "pool-scheduler / default"},
	{"ratio-pool-scheduler/pool-scheduler-unthrottled", "pool-scheduler / pool-scheduler-unthrottled (the shipped client limit's cost)"},
	{"ratio-default/default-unthrottled", "default / default-unthrottled (kube-scheduler's default client limit's cost)"},
}

func main() {
	// sums[workload][unit], runs[workload]
	sums := map[string]map[string]float64{}
	runs := map[string]int{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkInstalled/") {
			continue
		}
		// BenchmarkInstalled/500Nodes-2  1  123 ns/op  2000 pods ...: name, iterations, then value-unit pairs.
		workload := strings.TrimPrefix(f[0], "BenchmarkInstalled/")
		if i := strings.LastIndex(workload, "-"); i > 0 {
			workload = workload[:i]
		}
		if sums[workload] == nil {
			sums[workload] = map[string]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%q: %v\n", sc.Text(), err)
				os.Exit(1)
			}
			sums[workload][f[i+1]] += v
		}
		runs[workload]++
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "no BenchmarkInstalled results on stdin")
		os.Exit(1)
	}
	var workloads []string
	for w := range runs {
		workloads = append(workloads, w)
	}
	// 500Nodes before 5000Nodes: by node count.
	sort.Slice(workloads, func(i, j int) bool {
		return sums[workloads[i]]["nodes"]/float64(runs[workloads[i]]) < sums[workloads[j]]["nodes"]/float64(runs[workloads[j]])
	})
	mean := func(w, unit string) float64 { return sums[w][unit] / float64(runs[w]) }

	fmt.Println("| workload | scheduler | pods/s | create-to-bind p50 | p99 |")
	fmt.Println("|---|---|---|---|---|")
	for _, w := range workloads {
		desc := fmt.Sprintf("%s (%.0f nodes, %.0f pods; %.0f round(s) x %d run(s))", w, mean(w, "nodes"), mean(w, "pods"), mean(w, "rounds"), runs[w])
		for _, v := range variants {
			fmt.Printf("| %s | %s | %.1f | %.0f ms | %.0f ms |\n", desc, v, mean(w, v+"-pods/s"), mean(w, v+"-p50-ms"), mean(w, v+"-p99-ms"))
		}
	}
	fmt.Println()
	fmt.Print("| ratio (pods/s) |")
	for _, w := range workloads {
		fmt.Printf(" %s |", w)
	}
	fmt.Println()
	fmt.Print("|---|")
	for range workloads {
		fmt.Print("---|")
	}
	fmt.Println()
	for _, r := range ratios {
		fmt.Printf("| %s |", r.label)
		for _, w := range workloads {
			fmt.Printf(" %.2f |", mean(w, r.unit))
		}
		fmt.Println()
	}
}
