package e2e

import (
	"debug/buildinfo"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestBinariesReportTheirLine: pool-scheduler --version and pool-labeler --version name, on
// their second line, the release line the binaries are built on, and it is the one compiled in:
// the k8s.io/kubernetes module in the binary's build info (so the Makefile stamped the line's
// KUBE_VERSION), the minor of the Kubernetes libraries this test is compiled against (the same
// go.mod and tags), and the scheduler-plugins module in bin/pool-scheduler (or none).
func TestBinariesReportTheirLine(t *testing.T) {
	for _, bin := range []struct {
		path string
		// bundles: the binary compiles in scheduler-plugins when the line bundles it.
		bundles bool
	}{
		{util.SchedulerBinary(t), true},
		{util.LabelerBinary(t), false},
	} {
		info, err := buildinfo.ReadFile(bin.path)
		if err != nil {
			t.Fatalf("build info of %s: %v", bin.path, err)
		}
		modules := map[string]string{}
		for _, m := range info.Deps {
			modules[m.Path] = m.Version
		}
		if modules["k8s.io/kubernetes"] == "" {
			t.Fatalf("%s: k8s.io/kubernetes is not in its build info", bin.path)
		}
		if bin.bundles && modules["sigs.k8s.io/scheduler-plugins"] != version.SchedulerPlugins {
			t.Errorf("%s compiles in scheduler-plugins %q, but this line's version.SchedulerPlugins is %q (\"\": none)",
				bin.path, modules["sigs.k8s.io/scheduler-plugins"], version.SchedulerPlugins)
		}
		sp := version.SchedulerPlugins
		if sp == "" {
			sp = "none"
		}
		want := fmt.Sprintf("Kubernetes %s (line %s, scheduler-plugins %s)", modules["k8s.io/kubernetes"], version.KubernetesLine(), sp)
		out, err := exec.Command(bin.path, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin.path, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || lines[1] != want {
			t.Errorf("%s --version printed %q; want the build, then %q", bin.path, out, want)
		}
	}
}
