package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestVersionFlag: --version names pool-scheduler's version and commit (what the image test
// compares with the image's labels) and the Kubernetes release, and starts nothing.
func TestVersionFlag(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != version.String() || !strings.HasPrefix(lines[1], "Kubernetes v") {
		t.Errorf("--version printed %q, want %q then the Kubernetes version", out.String(), version.String())
	}
}
