// Package perf runs pool-scheduler's scheduler_perf suite (the upstream harness,
// k8s.io/kubernetes/test/integration/scheduler_perf) with pool-scheduler's plugins registered.
// See docs/performance.md for how to run it and what it measured.
package perf

import (
	"fmt"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
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
	// scheduler_perf's apiserver does not serve the MutatingAdmissionPolicy API (beta in 1.34);
	// with the process-wide gate on, its admission plugin would wait for the API forever.
	featuregatetesting.SetFeatureGateDuringTest(b, utilfeature.DefaultFeatureGate, genericfeatures.MutatingAdmissionPolicy, false)
	perf.RunBenchmarkPerfScheduling(b, suiteConfig(b, b.TempDir()), "poolscheduler", plugins.Registry())
}
