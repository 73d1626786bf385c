// Package perf runs pool-scheduler's scheduler_perf suite (the upstream harness,
// k8s.io/kubernetes/test/integration/scheduler_perf) with pool-scheduler's plugins registered.
// See docs/performance.md for how to run it and what it measured.
package perf

import (
	"fmt"
	"os"
	"testing"

	_ "k8s.io/component-base/logs/json/register"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, "config/performance-config.yaml", "poolscheduler", plugins.Registry())
}
