package poolctl

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandName: installed or linked as kubectl-pool, poolctl names itself as kubectl shows
// it, so help and usage read `kubectl pool audit`.
func TestCommandName(t *testing.T) {
	for argv0, want := range map[string]string{
		"poolctl":                          "poolctl",
		"/usr/local/bin/poolctl":           "poolctl",
		"/home/u/.krew/bin/kubectl-pool":   "kubectl pool",
		"kubectl-pool":                     "kubectl pool",
		"./kubectl-pool.exe":               "kubectl pool",
		"/usr/local/bin/kubectl-pool-tool": "poolctl",
	} {
		if got := CommandName(argv0); got != want {
			t.Errorf("CommandName(%q) = %q, want %q", argv0, got, want)
		}
	}
	cmd := newCommand(CommandName("/usr/local/bin/kubectl-pool"))
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"audit", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl pool audit [flags]", "--kubeconfig", "--context", "-n, --namespace"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not contain %q:\n%s", want, out.String())
		}
	}
}
