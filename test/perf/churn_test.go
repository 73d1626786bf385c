package perf

import (
	"context"
	"testing"
	"time"

	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
)

// BenchmarkChurn runs the churn workload (config/churn.yaml: nodes joining unlabelled and
// labelled later while pods that need them wait) under pool-scheduler's shipped profile, on an
// embedded control plane with the real scheduler, and reports how fast the gated pods bind once
// their node's labels land: label-to-bind p50 and p99 over every pod bound to a joining node.
// It fails if a pod is left pending or lands on a node before its labels (a correctness check,
// not a timing one).
func BenchmarkChurn(b *testing.B) {
	sc, err := simulate.Load("config/churn.yaml")
	if err != nil {
		b.Fatal(err)
	}
	modes, err := simulate.Modes()
	if err != nil {
		b.Fatal(err)
	}
	mode := modes[len(modes)-1]
	if mode.Name != "pool-scheduler" {
		b.Fatalf("last simulate mode is %q, want pool-scheduler", mode.Name)
	}
	var p50, p99 time.Duration
	runs := 0
	for b.Loop() {
		// A run ends at once when every pod is bound; Settle only bounds how long a quiet spell
		// may last before a pod still pending counts as left pending (2 s by default, which a
		// loaded CI machine exceeded between two label batches).
		res, err := simulate.Run(context.Background(), sc, mode, simulate.Options{Timeout: 5 * time.Minute, Settle: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if res.Bound != res.Pods {
			b.Fatalf("%d of %d pods bound", res.Bound, res.Pods)
		}
		if n := len(res.Report.PodsOnNotReadyNodes); n != 0 {
			b.Fatalf("%d pods bound to nodes whose pool labels were not applied", n)
		}
		if res.LabelToBindP99 == 0 {
			b.Fatal("no label-to-bind latency measured: no pod bound to a joining node")
		}
		p50, p99, runs = p50+res.LabelToBindP50, p99+res.LabelToBindP99, runs+1
	}
	b.ReportMetric(float64(p50.Milliseconds())/float64(runs), "label-to-bind-p50-ms")
	b.ReportMetric(float64(p99.Milliseconds())/float64(runs), "label-to-bind-p99-ms")
}
