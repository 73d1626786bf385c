package version

import (
	"regexp"
	"testing"

	k8sversion "k8s.io/component-base/version"
)

// TestLine: the line description names the Kubernetes release stamped into the build, the minor
// of the Kubernetes libraries compiled in and the scheduler-plugins release, or none. (test/e2e's
// TestBinariesReportTheirLine checks them against the modules in the built binaries.)
func TestLine(t *testing.T) {
	if !regexp.MustCompile(`^1\.[0-9]+$`).MatchString(KubernetesLine()) {
		t.Errorf("KubernetesLine() = %q, not a Kubernetes minor 1.<n>", KubernetesLine())
	}
	m := regexp.MustCompile(`^Kubernetes (\S+) \(line (1\.\d+), scheduler-plugins (v\S+|none)\)$`).FindStringSubmatch(Line())
	if m == nil {
		t.Fatalf("Line() = %q, not \"Kubernetes <release> (line <minor>, scheduler-plugins <version or none>)\"", Line())
	}
	wantSP := SchedulerPlugins
	if wantSP == "" {
		wantSP = "none"
	}
	if m[1] != k8sversion.Get().GitVersion || m[2] != KubernetesLine() || m[3] != wantSP {
		t.Errorf("Line() = %q, want Kubernetes %s, line %s, scheduler-plugins %s", Line(), k8sversion.Get().GitVersion, KubernetesLine(), wantSP)
	}
}
