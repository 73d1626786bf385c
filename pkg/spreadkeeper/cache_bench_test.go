package spreadkeeper

import (
	"testing"

	"github.com/pool-scheduler/pool-scheduler/test/util/podfixture"
)

// BenchmarkCachedPodMemory: the heap the spread keeper's pod caches hold per pod, whole and
// trimmed (trimPod), at podfixture.Pods realistic replicas. make test runs it once; the figures in
// docs/operations.md come from
// go test ./pkg/spreadkeeper -run '^$' -bench BenchmarkCachedPodMemory -benchtime 1x -count 3.
func BenchmarkCachedPodMemory(b *testing.B) { podfixture.ReportCacheMemory(b, trimPod) }
