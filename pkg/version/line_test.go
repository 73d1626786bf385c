package version

import (
	"fmt"
	"regexp"
	"strings"
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

// TestServesServer: a line serves its own minor and the next, never an older or a newer one.
func TestServesServer(t *testing.T) {
	var major, minor int
	if _, err := fmt.Sscanf(KubernetesLine(), "%d.%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, major, minor string
		wantErr            string
	}{
		{name: "its own minor", major: fmt.Sprint(major), minor: fmt.Sprint(minor)},
		{name: "the next minor, with a provider's +", major: fmt.Sprint(major), minor: fmt.Sprintf("%d+", minor+1)},
		{name: "two minors newer (an unattended upgrade)", major: fmt.Sprint(major), minor: fmt.Sprint(minor + 2), wantErr: fmt.Sprintf("run the release line of %d.%d", major, minor+2)},
		{name: "older", major: fmt.Sprint(major), minor: fmt.Sprint(minor - 1), wantErr: "outside this line's"},
		{name: "unreadable", major: "1", minor: "x", wantErr: "kube-apiserver version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ServesServer(tt.major, tt.minor)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("ServesServer(%s, %s) = %v, want error containing %q", tt.major, tt.minor, err, tt.wantErr)
			}
		})
	}
}
