package app

import (
	"bytes"
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestVersionFlag: pool-labeler --version prints the same lines as pool-scheduler --version:
// the build, then the release line.
func TestVersionFlag(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String()+"\n"+version.Line()+"\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}
