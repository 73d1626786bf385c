package util

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// SchedulerBinary returns the built bin/pool-scheduler (or $POOL_SCHEDULER_BINARY).
func SchedulerBinary(t testing.TB) string {
	return binary(t, "pool-scheduler", "POOL_SCHEDULER_BINARY")
}

// KubeSchedulerBinary returns the upstream kube-scheduler of the same Kubernetes version, built by
// `make kube-scheduler` into bin/kube-scheduler (or $KUBE_SCHEDULER_BINARY).
func KubeSchedulerBinary(t testing.TB) string {
	return binary(t, "kube-scheduler", "KUBE_SCHEDULER_BINARY")
}

// LabelerBinary returns the built bin/pool-labeler (or $POOL_LABELER_BINARY).
func LabelerBinary(t testing.TB) string { return binary(t, "pool-labeler", "POOL_LABELER_BINARY") }

// ToolBinary returns a built tool in bin/ (or $env): poolctl (make build), kubectl (make
// kubectl, from go.mod's tool directive).
func ToolBinary(t testing.TB, name, env string) string { return binary(t, name, env) }

func binary(t testing.TB, name, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		path = filepath.Join(RepoRoot(), "bin", name)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s binary %s: %v (run `make build kube-scheduler kubectl`, or `make e2e`)", name, path, err)
	}
	return path
}

// ShippedConfigFor returns the shipped KubeSchedulerConfiguration as a generic document with
// clientConnection.kubeconfig pointing at cp and NodePoolLabelSets read from every namespace,
// ready to be edited and written.
func ShippedConfigFor(t testing.TB, cp *controlplane.ControlPlane) map[string]any {
	t.Helper()
	data, err := os.ReadFile(ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	doc := ConfigDocFor(t, cp, data)
	// Tests create their NodePoolLabelSets in namespaces of their own (see LoadShippedConfig).
	delete(PluginArgsDoc(t, doc, "NodePoolReady"), "labelSetNamespaces")
	return doc
}

// ConfigDocFor returns a KubeSchedulerConfiguration file (data) as a generic document with
// clientConnection.kubeconfig pointing at cp, and nothing else changed.
func ConfigDocFor(t testing.TB, cp *controlplane.ControlPlane, data []byte) map[string]any {
	t.Helper()
	doc := map[string]any{}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	doc["clientConnection"].(map[string]any)["kubeconfig"] = kubeconfig
	return doc
}

// UpstreamConfigFor is a KubeSchedulerConfiguration with nothing set but the kubeconfig (cp) and
// leader election (off): kube-scheduler's default profile (default-scheduler) and client
// settings, as the cluster's default scheduler runs.
func UpstreamConfigFor(tb testing.TB, cp *controlplane.ControlPlane) map[string]any {
	tb.Helper()
	kubeconfig := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		tb.Fatal(err)
	}
	return map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
	}
}

// PluginArgsDoc returns the args map of plugin in the first profile of a config document.
func PluginArgsDoc(t testing.TB, doc map[string]any, plugin string) map[string]any {
	t.Helper()
	profile := doc["profiles"].([]any)[0].(map[string]any)
	for _, pc := range profile["pluginConfig"].([]any) {
		pc := pc.(map[string]any)
		if pc["name"] == plugin {
			if pc["args"] == nil {
				pc["args"] = map[string]any{}
			}
			return pc["args"].(map[string]any)
		}
	}
	t.Fatalf("no pluginConfig for %s", plugin)
	return nil
}

// SchedulerProcess is a built binary running as a child process.
type SchedulerProcess struct {
	Cmd      *exec.Cmd
	HTTPSURL string

	mu     sync.Mutex
	output bytes.Buffer
	done   chan struct{}
	err    error
}

// Output is what the process wrote to stdout and stderr so far.
func (p *SchedulerProcess) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

func (p *SchedulerProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.Write(b)
}

// Wait waits for the process to exit, up to timeout, and returns its error (nil for exit 0).
func (p *SchedulerProcess) Wait(timeout time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(timeout):
		return false, nil
	}
}

// StartSchedulerBinary writes doc as the scheduler's --config and starts the binary with it,
// serving HTTPS on a free port. The process is killed when the test ends; its output is logged
// if the test failed.
func StartSchedulerBinary(t testing.TB, doc map[string]any, extraArgs ...string) *SchedulerProcess {
	t.Helper()
	return StartSchedulerCommand(t, SchedulerBinary(t), doc, extraArgs...)
}

// StartSchedulerCommand is StartSchedulerBinary for any kube-scheduler command: binary is
// bin/pool-scheduler or the upstream bin/kube-scheduler.
func StartSchedulerCommand(t testing.TB, binary string, doc map[string]any, extraArgs ...string) *SchedulerProcess {
	t.Helper()
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	args := append([]string{"--config=" + cfgPath, fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--v=2"}, extraArgs...)
	p := StartProcess(t, binary, args...)
	p.HTTPSURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	return p
}

// StartProcess starts binary with args; it is killed when the test ends, and its output is
// logged if the test failed.
func StartProcess(t testing.TB, binary string, args ...string) *SchedulerProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &SchedulerProcess{done: make(chan struct{})}
	p.Cmd = exec.CommandContext(ctx, binary, args...)
	p.Cmd.Stdout, p.Cmd.Stderr = p, p
	if err := p.Cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", binary, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(binary), p.Output())
		}
	})
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ExpectBadArgsRefused starts the built scheduler with the shipped configuration, edit applied
// to plugin's args (leader election off), and fails t unless it exits non-zero with every
// string of wantInOutput in its output (structured logs escape quotes).
func ExpectBadArgsRefused(t *testing.T, cp *controlplane.ControlPlane, plugin string, edit func(args map[string]any), wantInOutput []string) {
	t.Helper()
	doc := ShippedConfigFor(t, cp)
	doc["leaderElection"].(map[string]any)["leaderElect"] = false
	edit(PluginArgsDoc(t, doc, plugin))
	proc := StartSchedulerBinary(t, doc)
	exited, err := proc.Wait(60 * time.Second)
	if !exited {
		t.Fatalf("scheduler still running with bad args; output:\n%s", proc.Output())
	}
	if err == nil {
		t.Fatalf("scheduler exited 0 with bad args; output:\n%s", proc.Output())
	}
	for _, want := range wantInOutput {
		if !strings.Contains(proc.Output(), want) {
			t.Fatalf("exit %v; output does not contain %q:\n%s", err, want, proc.Output())
		}
	}
	lines := strings.Split(strings.TrimSpace(proc.Output()), "\n")
	t.Logf("exit: %v; message: %s", err, strings.Join(lines[max(0, len(lines)-2):], " | "))
}
