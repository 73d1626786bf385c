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

// TestProgress: on a terminal one status line is rewritten in place and cleared at the end;
// with --progress=lines every message is a line; without a terminal (auto) or with none,
// nothing is written, so logs and pipes get only the table.
func TestProgress(t *testing.T) {
	messages := []string{"late-labels / default: starting etcd and kube-apiserver", "late-labels / default: measuring"}
	for _, tt := range []struct {
		mode string
		tty  bool
		want func(string) bool
	}{
		{"auto", false, func(out string) bool { return out == "" }},
		{"none", false, func(out string) bool { return out == "" }},
		{"lines", false, func(out string) bool { return out == messages[0]+"\n"+messages[1]+"\n" }},
		{"tty", true, func(out string) bool {
			return !strings.Contains(out, "\n") && strings.Count(out, "\r") == 4 && strings.Contains(out, "s] "+messages[1]) &&
				strings.HasSuffix(out, "\r") // cleared, the cursor back at the start
		}},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			var out bytes.Buffer
			mode := tt.mode
			if tt.tty {
				mode = "auto"
			}
			p, err := newProgress(&out, mode)
			if err != nil {
				t.Fatal(err)
			}
			if tt.tty {
				p.mode = "tty" // a bytes.Buffer is not a terminal; what auto picks on one
			}
			for _, m := range messages {
				p.line(m)
			}
			p.done()
			if !tt.want(out.String()) {
				t.Errorf("wrote %q", out.String())
			}
		})
	}
	if _, err := newProgress(&bytes.Buffer{}, "loud"); err == nil || !strings.Contains(err.Error(), "--progress") {
		t.Errorf("bad mode: %v", err)
	}
}
