package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

const labelerTimeout = 30 * time.Second

// TestLabeler runs pool-labeler's controller mode in process against a real apiserver.
func TestLabeler(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "labelsets")
	util.StartLabeler(t, cp, labeler.Options{})

	// waitNode polls a node until check passes.
	waitNode := func(t *testing.T, name, what string, check func(n *v1.Node) bool) *v1.Node {
		t.Helper()
		var node *v1.Node
		err := wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			node = n
			return check(n), nil
		})
		if err != nil {
			t.Fatalf("node %s: %s: timed out; labels %v annotations %v", name, what, node.Labels, node.Annotations)
		}
		return node
	}
	hasLabels := func(want map[string]string) func(*v1.Node) bool {
		return func(n *v1.Node) bool {
			for k, v := range want {
				if got, ok := n.Labels[k]; !ok || got != v {
					return false
				}
			}
			return true
		}
	}
	lacks := func(keys ...string) func(*v1.Node) bool {
		return func(n *v1.Node) bool {
			for _, k := range keys {
				if _, ok := n.Labels[k]; ok {
					return false
				}
			}
			return true
		}
	}
	managedIs := func(want string) func(*v1.Node) bool {
		return func(n *v1.Node) bool { return n.Annotations[pool.ManagedLabelsAnnotation] == want }
	}
	spotLabels := map[string]string{"example.com/lifecycle": "spot", "example.com/team": "data"}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "spot", spotLabels))

	t.Run("new node gets its pool's labels and the annotation", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot", "team-owned": "keep"}).Obj())
		n := waitNode(t, "spot-0", "labels applied", hasLabels(spotLabels))
		if got := n.Annotations[pool.ManagedLabelsAnnotation]; got != `["example.com/lifecycle","example.com/team"]` {
			t.Errorf("annotation = %q", got)
		}
		if n.Labels["team-owned"] != "keep" {
			t.Errorf("a label the labeler does not own changed: %v", n.Labels)
		}
	})

	t.Run("a label removed by hand comes back", func(t *testing.T) {
		util.PatchNode(tCtx, t, cs, "spot-0", `{"metadata":{"labels":{"example.com/team":null}}}`)
		waitNode(t, "spot-0", "drift corrected", hasLabels(spotLabels))
	})

	t.Run("a label changed by hand is restored", func(t *testing.T) {
		util.PatchNode(tCtx, t, cs, "spot-0", `{"metadata":{"labels":{"example.com/team":"web"}}}`)
		waitNode(t, "spot-0", "drift corrected", hasLabels(spotLabels))
	})

	t.Run("a label dropped from the set is removed from nodes", func(t *testing.T) {
		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "spot", map[string]string{"example.com/lifecycle": "spot"}))
		n := waitNode(t, "spot-0", "dropped label removed", lacks("example.com/team"))
		waitNode(t, "spot-0", "annotation rewritten", managedIs(`["example.com/lifecycle"]`))
		if n.Labels["team-owned"] != "keep" || n.Labels["example.com/lifecycle"] != "spot" {
			t.Errorf("labels after the drop: %v", n.Labels)
		}
	})

	t.Run("conflicts are reported, not overwritten", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("spot-1", map[string]string{poolKey: "spot", "example.com/lifecycle": "ondemand"}).Obj())
		// The counts are part of the condition: the set's status is recomputed as each node's
		// change is observed, and the first Conflict status can precede spot-0's (from the
		// subtest before) being counted in sync.
		set := waitLabelSetStatus(t, tCtx, cp, ns, "spot", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.State == labelsv1alpha1.SyncStateConflict && s.NodesMatched == 2 && s.NodesInSync == 1
		})
		if !strings.Contains(set.Status.Message, "spot-1") || !strings.Contains(set.Status.Message, "example.com/lifecycle") {
			t.Errorf("status message %q does not name the node and the key", set.Status.Message)
		}
		n, _ := cs.CoreV1().Nodes().Get(tCtx, "spot-1", metav1.GetOptions{})
		if n.Labels["example.com/lifecycle"] != "ondemand" {
			t.Errorf("conflicting label was overwritten: %v", n.Labels)
		}
		// The owner gives the label up: the labeler takes over and the set is synced.
		util.PatchNode(tCtx, t, cs, "spot-1", `{"metadata":{"labels":{"example.com/lifecycle":null}}}`)
		waitNode(t, "spot-1", "label applied after the conflict", hasLabels(map[string]string{"example.com/lifecycle": "spot"}))
		set = waitLabelSetStatus(t, tCtx, cp, ns, "spot", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.State == labelsv1alpha1.SyncStateSynced && s.NodesInSync == 2
		})
		if c := meta.FindStatusCondition(set.Status.Conditions, labeler.ConditionSynced); c == nil || c.Status != metav1.ConditionTrue || c.Message != set.Status.Message || c.ObservedGeneration != set.Generation {
			t.Errorf("Synced condition does not follow the status: %+v", set.Status.Conditions)
		}
		t.Logf("status: %+v", set.Status)
	})

	t.Run("a malformed annotation is repaired", func(t *testing.T) {
		node := util.Node("spot-2", map[string]string{poolKey: "spot", "example.com/lifecycle": "spot", "example.com/unknown": "x"}).Obj()
		node.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `{not json`}
		util.CreateNode(tCtx, t, cs, node)
		n := waitNode(t, "spot-2", "annotation repaired", managedIs(`["example.com/lifecycle"]`))
		if n.Labels["example.com/unknown"] != "x" {
			t.Errorf("a label was removed on a guess: %v", n.Labels)
		}
	})

	// A node another labeler (the nodepool-labels-operator) labelled from a set this labeler does
	// not see: its labels are not stale to this labeler, which must not strip them on a guess.
	foreign := util.Node("foreign-0", map[string]string{poolKey: "foreign", "example.com/gpu": "a100"}).Obj()
	foreign.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/gpu"]`}
	util.CreateNode(tCtx, t, cs, foreign)

	t.Run("a deleted set removes its managed labels", func(t *testing.T) {
		util.DeleteLabelSet(tCtx, t, cp, ns, "spot")
		for _, name := range []string{"spot-0", "spot-1", "spot-2"} {
			n := waitNode(t, name, "managed labels removed", lacks("example.com/lifecycle"))
			if n.Labels[poolKey] != "spot" {
				t.Errorf("%s lost its pool label: %v", name, n.Labels)
			}
		}
		n, _ := cs.CoreV1().Nodes().Get(tCtx, "spot-0", metav1.GetOptions{})
		if diff := cmp.Diff("keep", n.Labels["team-owned"]); diff != "" {
			t.Errorf("unowned label: %s", diff)
		}
	})

	t.Run("labels of a pool with no set in view are left alone", func(t *testing.T) {
		// Queued before the deletion above, whose cleanup has landed; and it stays so. A read
		// that fails (the client's rate limiter refuses a request that would outlast the poll's
		// deadline) is not a change; enough reads must have succeeded for the check to count.
		checked := 0
		err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, "foreign-0", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			checked++
			if n.Labels["example.com/gpu"] != "a100" || n.Annotations[pool.ManagedLabelsAnnotation] != `["example.com/gpu"]` {
				return false, fmt.Errorf("foreign-0 changed: labels %v annotations %v", n.Labels, n.Annotations)
			}
			return false, nil
		})
		if !wait.Interrupted(err) {
			t.Error(err)
		}
		if checked < 5 {
			t.Errorf("foreign-0 read %d times in 2 s, want at least 5 for the check to mean anything", checked)
		}
	})
}

func waitLabelSetStatus(t *testing.T, tCtx ktesting.TContext, cp *controlplane.ControlPlane, ns, name string, check func(labelsv1alpha1.NodePoolLabelSetStatus) bool) *labelsv1alpha1.NodePoolLabelSet {
	t.Helper()
	set := &labelsv1alpha1.NodePoolLabelSet{}
	err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
		u, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, set); err != nil {
			return false, err
		}
		return check(set.Status), nil
	})
	if err != nil {
		t.Fatalf("NodePoolLabelSet %s/%s status: %v; last %+v", ns, name, err, set.Status)
	}
	return set
}
