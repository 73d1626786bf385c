package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"
	"sigs.k8s.io/yaml"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestBinariesIgnoreTheConfiguredSystemNodeKeys (#34): both binaries take SystemPoolGuard's
// systemNodeSelector from the scheduler's configuration (pool-scheduler its --config, the labeler
// --scheduler-config) and ignore a NodePoolLabelSet's label on a key it reads, here one of the
// configuration's own rather than the default: the labeler applies the set's other labels, and
// the scheduler uses the node without waiting for the ignored label, which nothing writes.
func TestBinariesIgnoreTheConfiguredSystemNodeKeys(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const systemKey = "example.com/system"
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "user", map[string]string{"example.com/tier": "gold", systemKey: "true"}))
	util.CreateNode(tCtx, t, cs, util.Node("user-0", map[string]string{"nodepool.banzaicloud.io/name": "user"}).Obj())
	ns := util.CreateNamespace(tCtx, t, cs, "pods")

	doc := util.ShippedConfigFor(t, cp)
	util.PluginArgsDoc(t, doc, "NodePoolReady")["labelSetNamespaces"] = []any{"pool-scheduler"}
	util.PluginArgsDoc(t, doc, "SystemPoolGuard")["systemNodeSelector"] = map[string]any{"matchLabels": map[string]any{systemKey: "true"}}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, data, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	util.StartProcess(t, util.LabelerBinary(t), "controller", "--kubeconfig="+kubeconfig, "--scheduler-config="+config,
		"--leader-elect-namespace=pool-scheduler", "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	util.StartSchedulerBinary(t, doc)

	util.CreatePod(tCtx, t, cs, util.Pod(ns, "pinned").NodeSelector(map[string]string{v1.LabelHostname: "user-0"}).Obj())
	util.WaitForPods(tCtx, t, cs, ns, 60*time.Second, func(list []v1.Pod) (bool, error) {
		return len(list) == 1 && list[0].Spec.NodeName == "user-0", nil
	})
	n, err := cs.CoreV1().Nodes().Get(tCtx, "user-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels[systemKey]; ok || n.Labels["example.com/tier"] != "gold" {
		t.Errorf("node labels %v, want example.com/tier=gold and no %s", n.Labels, systemKey)
	}
	var status labelsv1alpha1.NodePoolLabelSetStatus
	err = wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace("pool-scheduler").Get(ctx, "user", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		set := &labelsv1alpha1.NodePoolLabelSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, set); err != nil {
			return false, err
		}
		status = set.Status
		return status.State == labelsv1alpha1.SyncStateError && status.NodesReady == 1 && strings.Contains(status.Message, systemKey), nil
	})
	if err != nil {
		t.Errorf("set status %+v, want Error naming %s and the node ready: %v", status, systemKey, err)
	}
}
