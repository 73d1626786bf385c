package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubernetes/test/utils/ktesting"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestLabelerAndSchedulerWhileNodesJoin runs both built binaries against one apiserver: pods
// wait for a pool that has no nodes, nodes join with only their pool label, pool-labeler labels
// them and pool-scheduler binds the pods. No pod may be bound before its node carried the pool's
// labels: the test compares the resourceVersions (etcd revisions, one global order) of the node
// update that completed the labels and of the binding.
func TestLabelerAndSchedulerWhileNodesJoin(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/lifecycle": "spot", "example.com/team": "data", "example.com/tier": "gold"}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "spot", want))
	ns := util.CreateNamespace(tCtx, t, cs, "join")

	// Watch before anything moves, so no update is missed.
	nodeWatch, err := cs.CoreV1().Nodes().Watch(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podWatch, err := cs.CoreV1().Pods(ns).Watch(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	labelledAt := map[string]uint64{} // node -> revision of the update that completed its labels
	boundAt := map[string][2]any{}    // pod -> {revision, node}
	collect := func(w watch.Interface) {
		for ev := range w.ResultChan() {
			mu.Lock()
			switch o := ev.Object.(type) {
			case *v1.Node:
				if _, seen := labelledAt[o.Name]; !seen && hasAll(o.Labels, want) {
					labelledAt[o.Name] = revision(t, o.ResourceVersion)
				}
			case *v1.Pod:
				if _, seen := boundAt[o.Name]; !seen && o.Spec.NodeName != "" {
					boundAt[o.Name] = [2]any{revision(t, o.ResourceVersion), o.Spec.NodeName}
				}
			}
			mu.Unlock()
		}
	}
	go collect(nodeWatch)
	go collect(podWatch)
	t.Cleanup(nodeWatch.Stop)
	t.Cleanup(podWatch.Stop)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	// Both as installed: the labeler reads the scheduler's configuration (the shipped file, whose
	// labelSetNamespaces is [pool-scheduler], where the set is), the scheduler runs it.
	util.StartProcess(t, util.LabelerBinary(t), "controller", "--kubeconfig="+kubeconfig,
		"--scheduler-config="+util.ShippedConfigPath(),
		"--leader-elect-namespace=pool-scheduler", "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	doc := util.ShippedConfigFor(t, cp)
	util.PluginArgsDoc(t, doc, "NodePoolReady")["labelSetNamespaces"] = []any{"pool-scheduler"}
	util.StartSchedulerBinary(t, doc)

	const pods, nodes = 30, 6
	// No node selector: without NodePoolReady these pods would bind the moment a node joins.
	for i := 0; i < pods; i++ {
		util.CreatePod(tCtx, t, cs, util.Pod(ns, fmt.Sprintf("app-%d", i)).Obj())
	}
	// Let the pods be tried against an empty pool first: every one found no node.
	util.WaitForPods(tCtx, t, cs, ns, 60*time.Second, func(list []v1.Pod) (bool, error) {
		tried := 0
		for _, p := range list {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					tried++
				}
			}
		}
		return tried == pods, nil
	})
	for i := 0; i < nodes; i++ {
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("spot-%d", i), map[string]string{"nodepool.banzaicloud.io/name": "spot"}).Obj())
	}
	util.WaitForPods(tCtx, t, cs, ns, 60*time.Second, func(list []v1.Pod) (bool, error) {
		bound := 0
		for _, p := range list {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == pods, nil
	})
	// The labeler's status, judged with the scheduler's configuration, agrees: every node ready.
	var status labelsv1alpha1.NodePoolLabelSetStatus
	err = wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace("pool-scheduler").Get(ctx, "spot", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		set := &labelsv1alpha1.NodePoolLabelSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, set); err != nil {
			return false, err
		}
		status = set.Status
		return status.NodesReady == nodes && status.NodesHeld == 0, nil
	})
	if err != nil {
		t.Errorf("set status %+v, want all %d nodes ready: %v", status, nodes, err)
	}
	// The watch may trail the list slightly.
	_ = wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(boundAt) == pods, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(boundAt) != pods {
		t.Fatalf("saw %d bindings, want %d", len(boundAt), pods)
	}
	for pod, b := range boundAt {
		rev, node := b[0].(uint64), b[1].(string)
		labelled, ok := labelledAt[node]
		switch {
		case !ok:
			t.Errorf("pod %s bound to %s, which never carried the pool's labels", pod, node)
		case labelled >= rev:
			t.Errorf("pod %s bound to %s at revision %d, before its labels landed at %d", pod, node, rev, labelled)
		}
	}
	t.Logf("%d pods bound to %d joining nodes, every binding after its node's labels (revisions %v)", pods, nodes, labelledAt)
}

func hasAll(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func revision(t *testing.T, rv string) uint64 {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Errorf("resourceVersion %q is not an etcd revision: %v", rv, err)
	}
	return n
}
