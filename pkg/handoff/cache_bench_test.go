package handoff

import (
	"testing"

	"github.com/pool-scheduler/pool-scheduler/test/util/podfixture"
)

// BenchmarkCachedPodMemory: the heap the hand-off controller's cache of waiting pods holds per
// pod, whole and
// trimmed (trimWaitingPod), at podfixture.Pods realistic replicas. make test runs it once; the figures in
// docs/operations.md come from
// go test ./pkg/handoff -run '^$' -bench BenchmarkCachedPodMemory -benchtime 1x -count 3.
func BenchmarkCachedPodMemory(b *testing.B) { podfixture.ReportCacheMemory(b, trimWaitingPod) }
