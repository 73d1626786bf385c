package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// memoryCluster is the cluster a memory measurement fills: nodes of one pool with a set (the
// labeler applies it to every one), and pods bound to them, podsPerNode each, pool-scheduler's
// (the scheduler and the spread keeper cache every one), plus pending ones it places.
type memoryCluster struct{ nodes, podsPerNode, pending int }

// memoryFigures are a component's resident memory once the cluster is in place and its work
// done: VmRSS (now) and VmHWM (the peak), from /proc/<pid>/status.
type memoryFigures struct{ rss, peak int64 }

// runMemory starts the built components as installed (shipped configuration; the labeler's
// client rate raised so that its first pass over every node is quick: memory, not time, is
// measured), fills the cluster under them, waits until the labeler has conditioned every node
// and the scheduler has bound every pending pod, lets them settle, and reads their memory.
func runMemory(ctx context.Context, tb testing.TB, cp *controlplane.ControlPlane, c memoryCluster, settle time.Duration) map[string]memoryFigures {
	tb.Helper()
	cs := cp.Client
	const ns = "pool-scheduler"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	util.MustApplyLabelSet(ctx, tb, cp, util.LabelSet(ns, "apps", map[string]string{"example.com/tier": "apps"}))
	kubeconfig := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		tb.Fatal(err)
	}
	common := []string{"--kubeconfig=" + kubeconfig, "--config=" + util.ShippedConfigPath(), "--leader-elect-namespace=" + ns,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--kube-api-qps=1000", "--kube-api-burst=2000"}
	procs := map[string]*util.SchedulerProcess{
		"pool-scheduler":          util.StartSchedulerBinary(tb, util.ShippedConfigFor(tb, cp)),
		"pool-labeler controller": util.StartProcess(tb, util.LabelerBinary(tb), append([]string{"controller"}, common...)...),
		"pool-labeler spread":     util.StartProcess(tb, util.LabelerBinary(tb), append([]string{"spread"}, common...)...),
	}

	apps := util.CreateNamespace(ctx, tb, cs, "apps")
	util.Parallel(ctx, tb, c.nodes, func(i int) error {
		name := fmt.Sprintf("aks-apps-12345678-vmss%06d", i)
		if _, err := cs.CoreV1().Nodes().Create(ctx, util.Node(name, map[string]string{util.AgentPoolKey: "apps", "kubernetes.azure.com/mode": "user"}).Obj(), metav1.CreateOptions{}); err != nil {
			return err
		}
		for j := range c.podsPerNode {
			if _, err := cs.CoreV1().Pods(apps).Create(ctx, util.Pod(apps, fmt.Sprintf("%s-%d", name, j)).Node(name).Obj(), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	util.Parallel(ctx, tb, c.pending, func(i int) error {
		_, err := cs.CoreV1().Pods(apps).Create(ctx, util.Pod(apps, fmt.Sprintf("pending-%d", i)).Obj(), metav1.CreateOptions{})
		return err
	})
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		return labelledAndBound(ctx, cs, apps, c)
	}); err != nil {
		tb.Fatalf("the labeler did not condition every node or the scheduler did not bind every pod: %v", err)
	}
	time.Sleep(settle)
	out := map[string]memoryFigures{}
	for name, p := range procs {
		out[name] = processMemory(tb, p.Cmd.Process.Pid)
	}
	return out
}

// labelledAndBound: every node carries the labeler's condition and every pod is bound.
func labelledAndBound(ctx context.Context, cs kubernetes.Interface, apps string, c memoryCluster) (bool, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return false, nil
	}
	conditioned := 0
	for i := range nodes.Items {
		for _, cond := range nodes.Items[i].Status.Conditions {
			if cond.Type == pool.ConditionPoolLabelsApplied {
				conditioned++
			}
		}
	}
	pods, err := cs.CoreV1().Pods(apps).List(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: "spec.nodeName="})
	if err != nil {
		return false, nil
	}
	return conditioned == c.nodes && len(pods.Items) == 0, nil
}

// processMemory reads VmRSS and VmHWM (kB in the file) of pid.
func processMemory(tb testing.TB, pid int) memoryFigures {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	var m memoryFigures
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.peak = kb << 10
		}
	}
	if m.rss == 0 || m.peak == 0 {
		tb.Fatalf("/proc/%d/status: no VmRSS or VmHWM", pid)
	}
	return m
}

// TestComponentMemory (#60) is the smoke of BenchmarkComponentMemory: the built components run
// as installed over a small cluster, do their work (every node conditioned, every pod bound), and
// their memory is read.
func TestComponentMemory(t *testing.T) {
	ctx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	got := runMemory(ctx, t, cp, memoryCluster{nodes: 20, podsPerNode: 5, pending: 20}, 0)
	if len(got) != 3 {
		t.Errorf("memory of %d components, want 3", len(got))
	}
	for name, m := range got {
		t.Logf("%s: RSS %d MiB, peak %d MiB", name, m.rss>>20, m.peak>>20)
	}
}

// BenchmarkComponentMemory (#60): each component's resident memory, now and at its peak, at
// 5000 nodes and 50 000 pods (45 000 bound, 9 per node, and 5000 pool-scheduler places), built
// binaries, shipped configuration. Run:
//
//	make build && PATH=$PWD/bin:$PATH go test -run '^$' -bench BenchmarkComponentMemory -benchtime 1x -timeout 60m ./test/e2e/
func BenchmarkComponentMemory(b *testing.B) {
	for range b.N {
		func() {
			ctx := ktesting.Init(b)
			cp := util.StartControlPlane(b)
			got := runMemory(ctx, b, cp, memoryCluster{nodes: 5000, podsPerNode: 9, pending: 5000}, 30*time.Second)
			for name, m := range got {
				unit := strings.ReplaceAll(name, " ", "-")
				b.ReportMetric(float64(m.rss>>20), unit+"-rss-MiB")
				b.ReportMetric(float64(m.peak>>20), unit+"-peak-MiB")
			}
		}()
	}
}
