// Command installedreport turns the output of test/installed's BenchmarkInstalled (go test
// -bench, read from stdin) into the markdown tables of docs/performance.md: per workload and
// scheduler, pods/s and the p50/p99 of create-to-bind latency, and the ratios the benchmark
// reports; each the mean over the runs (-count) in the output. Below them, every round's pods/s
// and the goal's ratio within the round, from the benchmark's log ("round N: ...").
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	// "--- BENCH: BenchmarkInstalled/500Nodes-2" heads a benchmark's log.
	benchHeader = regexp.MustCompile(`^--- BENCH: BenchmarkInstalled/(\S+?)(-\d+)?$`)
	// "installed_test.go:175: round 1: default-unthrottled 241.3 pods/s (p50 ..., p99 ...), ...".
	roundLine    = regexp.MustCompile(`: round (\d+): (.*)$`)
	roundVariant = regexp.MustCompile(`(\S+) ([0-9.]+) pods/s`)
)

// round is one round of every variant, as the benchmark logged it.
type round struct {
	workload string
	run      int // the benchmark run (-count) it belongs to, from 1
	n        int
	podsPerS map[string]float64
}

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
	var rounds []round
	logRuns := map[string]int{}
	logWorkload := ""
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := benchHeader.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			logWorkload = m[1]
			logRuns[logWorkload]++
			continue
		}
		if r, ok := parseRound(sc.Text()); ok && logWorkload != "" {
			r.workload, r.run = logWorkload, logRuns[logWorkload]
			rounds = append(rounds, r)
			continue
		}
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
	printRounds(workloads, rounds)
}

// parseRound reads one "round N: <variant> <x> pods/s (...), ..." log line.
func parseRound(line string) (round, bool) {
	m := roundLine.FindStringSubmatch(line)
	if m == nil {
		return round{}, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return round{}, false
	}
	r := round{n: n, podsPerS: map[string]float64{}}
	for _, v := range roundVariant.FindAllStringSubmatch(m[2], -1) {
		x, err := strconv.ParseFloat(v[2], 64)
		if err != nil {
			return round{}, false
		}
		r.podsPerS[v[1]] = x
	}
	return r, len(r.podsPerS) > 0
}

// printRounds writes every round's pods/s per variant and the goal's ratio within the round: the
// spread between rounds is the machine's, and a ratio within a round compares schedulers that ran
// minutes apart on the same cluster.
func printRounds(workloads []string, rounds []round) {
	if len(rounds) == 0 {
		return
	}
	fmt.Println()
	fmt.Print("Pods/s per round (in the order run; each round rotates the order of the schedulers by one):\n\n| workload | run.round |")
	for _, v := range variants {
		fmt.Printf(" %s |", v)
	}
	fmt.Println(" pool-scheduler / default-unthrottled |")
	fmt.Print("|---|---|")
	for range variants {
		fmt.Print("---|")
	}
	fmt.Println("---|")
	for _, w := range workloads {
		for _, r := range rounds {
			if r.workload != w {
				continue
			}
			fmt.Printf("| %s | %d.%d |", w, r.run, r.n)
			for _, v := range variants {
				if x, ok := r.podsPerS[v]; ok {
					fmt.Printf(" %.1f |", x)
				} else {
					fmt.Print(" - |")
				}
			}
			if d := r.podsPerS["default-unthrottled"]; d > 0 {
				fmt.Printf(" %.2f |\n", r.podsPerS["pool-scheduler"]/d)
			} else {
				fmt.Println(" - |")
			}
		}
	}
}
