// Package version holds the build's version, stamped by the Makefile through -ldflags -X.
package version

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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

// APIServerSupported is pool_scheduler_apiserver_supported, the verdict of ServesServer as a
// gauge. The scheduler (at each start) and the hand-off controller (its leader, every few
// minutes) report it, each in its own process and registry; it has no series until WithLabelValues.
var APIServerSupported = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "pool_scheduler_apiserver_supported",
	Help: "1 while kube-apiserver runs a minor this release line serves (its own or the next), 0 outside: pods are then not handed to pool-scheduler. Reported by the scheduler (read at its start) and by the hand-off controller's leader.",
}, nil)

var registerSupported sync.Once

// RegisterAPIServerSupported exposes APIServerSupported in component-base's legacy registry (the
// scheduler's); the hand-off controller registers it in controller-runtime's.
func RegisterAPIServerSupported() {
	registerSupported.Do(func() { legacyregistry.RawMustRegister(APIServerSupported) })
}
