package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestLabelerDefaultNamespace runs bin/pool-labeler controller without --scheduler-config or
// --namespaces, in a pod's environment ($POD_NAMESPACE, as its Deployments set it): it applies
// the NodePoolLabelSets of its own namespace only, logs a warning that says so and how to widen
// it, and leaves a set of the same pool in another namespace alone (not applied, no status).
// With --all-namespaces it applies both.
func TestLabelerDefaultNamespace(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const own = "pool-scheduler"
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := util.CreateNamespace(tCtx, t, cs, "team")
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(own, "spot", map[string]string{"example.com/own": "yes"}))
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(other, "spot", map[string]string{"example.com/other": "yes"}))
	util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot"}).Obj())

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", own) // the binary inherits it
	args := []string{"controller", "--kubeconfig=" + kubeconfig, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2"}

	proc := util.StartProcess(t, util.LabelerBinary(t), args...)
	// The sets of both namespaces are in the cache before the first reconcile when both are read,
	// so the node's first labelling write would carry both keys.
	managed := waitManaged(tCtx, t, cp, "spot-0", proc.Output)
	if managed != `["example.com/own"]` {
		t.Errorf("managed labels %s, want only the own namespace's set's key [\"example.com/own\"]", managed)
	}
	n, err := cs.CoreV1().Nodes().Get(tCtx, "spot-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels["example.com/other"]; ok || n.Labels["example.com/own"] != "yes" {
		t.Errorf("node labels %v, want example.com/own=yes and no example.com/other", n.Labels)
	}
	warning := regexp.MustCompile(`(?m)^W\d{4} .*namespace ` + own + ` only.*--namespaces=.*--all-namespaces`)
	if !warning.MatchString(proc.Output()) {
		t.Errorf("the labeler's log lacks the warning (%s):\n%s", warning, proc.Output())
	}
	otherSet, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(other).Get(tCtx, "spot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := unstructured.NestedMap(otherSet.Object, "status"); len(status) > 0 {
		t.Errorf("the other namespace's set got a status: %v", status)
	}

	// Widened: both sets apply.
	proc.Kill(t)
	util.StartProcess(t, util.LabelerBinary(t), append(args, "--all-namespaces")...)
	if managed := waitManagedIs(tCtx, t, cp, "spot-0", `["example.com/other","example.com/own"]`); managed != `["example.com/other","example.com/own"]` {
		t.Errorf("with --all-namespaces: managed labels %s, want both sets' keys", managed)
	}
}

// waitManaged waits for the node's managed-labels annotation and returns it.
func waitManaged(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, node string, output func() string) string {
	t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = n.Annotations[pool.ManagedLabelsAnnotation]
		return got != "", nil
	})
	if err != nil {
		t.Fatalf("node %s was not labelled: %v\n%s", node, err, output())
	}
	return got
}

// waitManagedIs waits for the node's managed-labels annotation to be want and returns the last seen.
func waitManagedIs(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, node, want string) string {
	t.Helper()
	var got string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			got = n.Annotations[pool.ManagedLabelsAnnotation]
		}
		return got == want, nil
	})
	return got
}
