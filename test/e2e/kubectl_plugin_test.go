package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestKubectlPoolAudit installs the built poolctl as the kubectl plugin kubectl-pool (a link on
// PATH, as krew installs it) and runs `kubectl pool audit` with the real kubectl (built from
// k8s.io/kubernetes/cmd/kubectl at the pinned release): kubectl finds the plugin, passes its
// connection flags through, and the audit reads the cluster and reports the finding seeded in it.
func TestKubectlPoolAudit(t *testing.T) {
	tCtx := ktesting.Init(t)
	kubectl := util.ToolBinary(t, "kubectl", "KUBECTL_BINARY")
	poolctl := util.ToolBinary(t, "poolctl", "POOLCTL_BINARY")
	cp := util.StartControlPlane(t)
	ns := util.CreateNamespace(tCtx, t, cp.Client, "plugin")
	// The deployed scheduler configuration, which the audit reads from the cluster.
	config, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.InstallConfigMap(tCtx, t, cp.Client, "pool-scheduler", "pool-scheduler-config", map[string]string{"config.yaml": string(config)})
	util.CreateNode(tCtx, t, cp.Client, util.Node("system-0", map[string]string{"kubernetes.azure.com/agentpool": "system"}).Obj())
	util.CreatePod(tCtx, t, cp.Client, util.Pod(ns, "user-on-system").Node("system-0").Obj())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}

	pluginDir := t.TempDir()
	if err := os.Symlink(poolctl, filepath.Join(pluginDir, "kubectl-pool")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(kubectl, args...)
		// Only the plugin directory and the system's: kubectl finds kubectl-pool by PATH.
		cmd.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+"/usr/bin:/bin", "KUBECONFIG="+filepath.Join(pluginDir, "none"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out), &exitError{err, stderr.String()}
		}
		return string(out), nil
	}

	list, err := run("plugin", "list", "--name-only")
	if err != nil {
		t.Fatalf("kubectl plugin list: %v", err)
	}
	if !strings.Contains(list, "kubectl-pool") {
		t.Errorf("kubectl plugin list does not show kubectl-pool:\n%s", list)
	}
	help, err := run("pool", "audit", "--help")
	if err != nil {
		t.Fatalf("kubectl pool audit --help: %v", err)
	}
	if !strings.Contains(help, "kubectl pool audit [flags]") {
		t.Errorf("the plugin does not call itself `kubectl pool`:\n%s", help)
	}
	out, err := run("pool", "audit", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json", "--max-findings", "1")
	if err != nil {
		t.Fatalf("kubectl pool audit: %v\n%s", err, out)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("kubectl pool audit -o json: %v\n%s", err, out)
	}
	if len(r.UserPodsOnSystemNodes) != 1 || !strings.HasSuffix(r.UserPodsOnSystemNodes[0].Object, "/user-on-system") || r.NumFindings() != 1 {
		t.Errorf("kubectl pool audit found %+v, want the one user pod on system-0", r)
	}
	// The CI contract holds through kubectl: more findings than allowed exits non-zero.
	if _, err := run("pool", "audit", "--kubeconfig", kubeconfig, "--max-findings", "0"); err == nil {
		t.Error("kubectl pool audit --max-findings 0 with a finding exited 0")
	}
}

type exitError struct {
	err    error
	stderr string
}

func (e *exitError) Error() string { return e.err.Error() + ": " + e.stderr }
