package app

import (
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestSchedulerPluginsMatchTheLine: the binary registers scheduler-plugins' plugins exactly when
// --version says the line bundles scheduler-plugins (version.SchedulerPlugins; both are set per
// line by the k8s136 build tag). test/e2e's TestBinariesReportTheirLine checks the version
// against the module compiled into the built binary. (A test binary's build info lists no
// modules, so it cannot be checked here.)
func TestSchedulerPluginsMatchTheLine(t *testing.T) {
	bundled := version.SchedulerPlugins != ""
	if got := len(schedulerPlugins) > 0; got != bundled {
		t.Errorf("%d scheduler-plugins plugins registered, but version.SchedulerPlugins is %q", len(schedulerPlugins), version.SchedulerPlugins)
	}
	// The plugin test/e2e's TestBinaryComposesWithOtherPlugins enables on a line that bundles them.
	if _, got := schedulerPlugins["NodeResourcesAllocatable"]; got != bundled {
		t.Errorf("NodeResourcesAllocatable registered: %v, but version.SchedulerPlugins is %q", got, version.SchedulerPlugins)
	}
}
