package app

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestVersionFlag: --version names pool-scheduler's version and commit (what the image test
// compares with the image's labels), then the release line (version.Line: the Kubernetes
// release and minor, scheduler-plugins bundled or not), and starts nothing.
func TestVersionFlag(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := []string{version.String(), version.Line()}; !slices.Equal(lines, want) {
		t.Errorf("--version printed %q, want the lines %q", out.String(), want)
	}
}
