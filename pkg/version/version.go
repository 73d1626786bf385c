// Package version holds the build's version, stamped by the Makefile through -ldflags -X.
package version

import (
	"fmt"
	"runtime"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// Version is the pool-scheduler release, e.g. v0.1.0 (git describe).
	Version = "v0.0.0-dev"
	// GitCommit is the commit the binary was built from.
	GitCommit = "unknown"
)

// String describes the build in one line.
func String() string {
	return fmt.Sprintf("pool-scheduler %s (commit %s, %s)", Version, GitCommit, runtime.Version())
}

var buildInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Subsystem:      "pool_scheduler",
	Name:           "build_info",
	Help:           "Always 1; the labels describe the pool-scheduler build.",
	StabilityLevel: metrics.ALPHA,
}, []string{"version", "git_commit", "go_version"})

var once sync.Once

// RegisterMetric exposes the build as pool_scheduler_build_info.
func RegisterMetric() {
	once.Do(func() {
		legacyregistry.MustRegister(buildInfo)
		buildInfo.WithLabelValues(Version, GitCommit, runtime.Version()).Set(1)
	})
}
