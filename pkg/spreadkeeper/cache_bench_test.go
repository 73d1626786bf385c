package spreadkeeper

import (
	"testing"

	"github.com/pool-scheduler/pool-scheduler/test/util/podfixture"
)

// BenchmarkCachedPodMemory: the heap the spread keeper's pod caches hold per pod, whole and
// trimmed (trimPod), at podfixture.Pods realistic replicas. make test runs it once; the figures
// in docs/operations.md come from
// go test ./pkg/spreadkeeper -run '^$' -bench BenchmarkCachedPodMemory -benchtime 1x -count 5.
func BenchmarkCachedPodMemory(b *testing.B) {
	for range b.N {
		whole := podfixture.CachedBytesPerPod(b, podfixture.Pods, nil)
		trimmed := podfixture.CachedBytesPerPod(b, podfixture.Pods, trimPod)
		b.ReportMetric(whole, "B/pod-whole")
		b.ReportMetric(trimmed, "B/pod-trimmed")
		b.ReportMetric(trimmed*10000/(1<<20), "MiB-trimmed-10k")
	}
}
