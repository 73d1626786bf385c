package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

var (
	startupTaint = v1.Taint{Key: pool.StartupTaintKey, Value: "true", Effect: v1.TaintEffectNoSchedule}
	otherTaint   = v1.Taint{Key: "example.com/other", Value: "x", Effect: v1.TaintEffectNoSchedule}
)

// startInstalledLabeler runs the labeler controller as installed (its ServiceAccount, RBAC and
// admission policy from manifests/labeler/controller, the shipped scheduler configuration) with
// the default startup taint key, and returns the ServiceAccount's client, a function stopping
// the labeler and one starting it again (which returns its own stop).
func startInstalledLabeler(tCtx ktesting.TContext, t *testing.T, cp *controlplane.ControlPlane) (kubernetes.Interface, func(), func() func()) {
	t.Helper()
	const ns = "pool-scheduler"
	if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	util.ApplyAccessObjects(tCtx, t, cp, util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "labeler", "controller")))
	saCfg, _ := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-labeler", nil)
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	waitLabelerPolicy(tCtx, t, cp.Client, sa)
	opts := util.ShippedLabelerOptions(t)
	run := func() func() {
		stop := util.RunLabelerAs(t, saCfg, opts)
		t.Cleanup(stop)
		return stop
	}
	return sa, run(), run
}

// waitLabelerPolicy waits until the labeler's admission policy is in force (the apiserver sees
// policies through informers, a moment after they are created): a dry-run removal of another
// taint by the labeler's identity is refused.
func waitLabelerPolicy(tCtx ktesting.TContext, t *testing.T, admin, sa kubernetes.Interface) {
	t.Helper()
	const probe = "policy-probe"
	util.CreateNode(tCtx, t, admin, util.Node(probe, map[string]string{poolKey: "probe"}).Taints([]v1.Taint{otherTaint}).Obj())
	err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := sa.CoreV1().Nodes().Patch(ctx, probe, types.MergePatchType, []byte(`{"spec":{"taints":[]}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "may remove only the startup taint"), nil
	})
	if err != nil {
		t.Fatalf("the labeler's admission policy is not in force: %v", err)
	}
	if err := admin.CoreV1().Nodes().Delete(tCtx, probe, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodeVersions records every version of a node from its creation on, as a watch sees it.
type nodeVersions struct {
	w    watch.Interface
	seen []*v1.Node
}

func watchNode(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, name string) *nodeVersions {
	t.Helper()
	w, err := cs.CoreV1().Nodes().Watch(tCtx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &nodeVersions{w: w}
}

// until reads versions until done says the node is where it should end (bounded by
// labelerTimeout), and returns the last.
func (nv *nodeVersions) until(t *testing.T, what string, done func(*v1.Node) bool) *v1.Node {
	t.Helper()
	timeout := time.After(labelerTimeout)
	for {
		select {
		case ev, ok := <-nv.w.ResultChan():
			if !ok {
				t.Fatalf("watch closed waiting for %s", what)
			}
			n, isNode := ev.Object.(*v1.Node)
			if !isNode {
				continue
			}
			nv.seen = append(nv.seen, n)
			if done(n) {
				return n
			}
		case <-timeout:
			var last *v1.Node
			if len(nv.seen) > 0 {
				last = nv.seen[len(nv.seen)-1]
			}
			t.Fatalf("timed out waiting for %s; last version %+v", what, last)
		}
	}
}

// condition is the node's PoolLabelsApplied condition, nil if none.
func condition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == pool.ConditionPoolLabelsApplied {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func conditionIs(n *v1.Node, status v1.ConditionStatus, reason string) bool {
	c := condition(n)
	return c != nil && c.Status == status && c.Reason == reason
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

func carries(n *v1.Node, want map[string]string) bool {
	for k, v := range want {
		if n.Labels[k] != v {
			return false
		}
	}
	return true
}

func taintKeys(n *v1.Node) []string {
	keys := []string{}
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key)
	}
	return keys
}

// TestStartupTaintLifted (#46): the labeler lifts the startup taint from a node of a pool with
// a NodePoolLabelSet in the very patch that applies its labels (one write per join), never
// from a node whose labels are not applied, and never another taint; under its admission
// policy (the labeler as installed).
func TestStartupTaintLifted(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const ns = "pool-scheduler"
	want := map[string]string{"example.com/tier": "gold"}
	startInstalledLabeler(tCtx, t, cp)
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "spot", want))
	applied := func(n *v1.Node) bool { return conditionIs(n, v1.ConditionTrue, "LabelsApplied") }

	t.Run("labels and the taint in one patch, other taints kept", func(t *testing.T) {
		nv := watchNode(tCtx, t, cs, "spot-0")
		util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot"}).Taints([]v1.Taint{otherTaint, startupTaint}).Obj())
		n := nv.until(t, "the startup taint lifted", func(n *v1.Node) bool { return !hasTaint(n, pool.StartupTaintKey) })
		if !carries(n, want) {
			t.Errorf("taint lifted from a node without its pool's labels: %v", n.Labels)
		}
		if diff := cmp.Diff([]string{otherTaint.Key}, taintKeys(n)); diff != "" {
			t.Errorf("taints after the lift (-want +got):\n%s", diff)
		}
		waitNodeCheck(tCtx, t, cs, "spot-0", "condition PoolLabelsApplied True", applied)
		// The creation, then the labeler's one write.
		if len(nv.seen) != 2 {
			t.Errorf("%d versions of the node, want 2 (created; labels and taint in one patch)", len(nv.seen))
		}
	})

	t.Run("held while a label conflicts, lifted once it is resolved", func(t *testing.T) {
		// Someone else set the pool's key to another value: the labeler does not overwrite it,
		// so the labels are not applied and the taint stays.
		nv := watchNode(tCtx, t, cs, "spot-1")
		util.CreateNode(tCtx, t, cs, util.Node("spot-1", map[string]string{poolKey: "spot", "example.com/tier": "silver"}).Taints([]v1.Taint{startupTaint}).Obj())
		// A node created after it, lifted: the labeler has judged spot-1 (one worker, in order).
		util.CreateNode(tCtx, t, cs, util.Node("spot-2", map[string]string{poolKey: "spot"}).Taints([]v1.Taint{startupTaint}).Obj())
		waitNodeCheck(tCtx, t, cs, "spot-2", "startup taint lifted", func(n *v1.Node) bool { return !hasTaint(n, pool.StartupTaintKey) })
		n, err := cs.CoreV1().Nodes().Get(tCtx, "spot-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !hasTaint(n, pool.StartupTaintKey) {
			t.Fatalf("startup taint lifted from a node whose label conflicts: %v", n.Labels)
		}
		waitNodeCheck(tCtx, t, cs, "spot-1", "condition PoolLabelsApplied False (WrongValue)", func(n *v1.Node) bool {
			return conditionIs(n, v1.ConditionFalse, "WrongValue")
		})
		patchNode(tCtx, t, cs, "spot-1", `{"metadata":{"labels":{"example.com/tier":"gold"}}}`)
		nv.until(t, "the startup taint lifted once the label is right", func(n *v1.Node) bool { return !hasTaint(n, pool.StartupTaintKey) })
		waitNodeCheck(tCtx, t, cs, "spot-1", "condition PoolLabelsApplied True", applied)
		for _, v := range nv.seen {
			if !hasTaint(v, pool.StartupTaintKey) && !carries(v, want) {
				t.Errorf("version %s: taint gone before the labels: %v", v.ResourceVersion, v.Labels)
			}
		}
	})

	t.Run("a forged condition is corrected on its own event", func(t *testing.T) {
		// Another node-status writer sets the condition True on a held node: the labeler
		// rewrites it on the status event, not at the next resync (controller-runtime's
		// default, 10 hours, here).
		util.CreateNode(tCtx, t, cs, util.Node("spot-4", map[string]string{poolKey: "spot", "example.com/tier": "silver"}).Taints([]v1.Taint{startupTaint}).Obj())
		held := func(n *v1.Node) bool { return conditionIs(n, v1.ConditionFalse, "WrongValue") }
		nv := watchNode(tCtx, t, cs, "spot-4")
		nv.until(t, "condition PoolLabelsApplied False (WrongValue)", held)
		forged := `{"status":{"conditions":[{"type":"` + pool.ConditionPoolLabelsApplied + `","status":"True","reason":"LabelsApplied","message":"forged"}]}}`
		if _, err := cs.CoreV1().Nodes().Patch(tCtx, "spot-4", types.StrategicMergePatchType, []byte(forged), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		nv.until(t, "the forged condition", func(n *v1.Node) bool { return conditionIs(n, v1.ConditionTrue, "LabelsApplied") })
		n := nv.until(t, "the forged condition corrected", held)
		if !hasTaint(n, pool.StartupTaintKey) {
			t.Errorf("startup taint lifted from a node whose label conflicts: %v", n.Labels)
		}
	})

	t.Run("no set in view, no pool: the taint stays", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("other-0", map[string]string{poolKey: "no-set"}).Taints([]v1.Taint{startupTaint}).Obj())
		util.CreateNode(tCtx, t, cs, util.Node("stray-0", nil).Taints([]v1.Taint{startupTaint}).Obj())
		util.CreateNode(tCtx, t, cs, util.Node("spot-3", map[string]string{poolKey: "spot"}).Taints([]v1.Taint{startupTaint}).Obj())
		waitNodeCheck(tCtx, t, cs, "spot-3", "startup taint lifted", func(n *v1.Node) bool { return !hasTaint(n, pool.StartupTaintKey) })
		for _, name := range []string{"other-0", "stray-0"} {
			n, err := cs.CoreV1().Nodes().Get(tCtx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !hasTaint(n, pool.StartupTaintKey) {
				t.Errorf("%s: startup taint lifted from a node of no pool with a set", name)
			}
			if c := condition(n); c != nil {
				t.Errorf("%s: condition %+v on a node of no pool with a set", name, c)
			}
		}
	})
}

// TestStartupTaintPolicy (#46): the labeler's admission policy lets its identity remove the
// startup taint from a node of a pool and refuses every other taint change.
func TestStartupTaintPolicy(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const ns = "pool-scheduler"
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.ApplyAccessObjects(tCtx, t, cp, util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "labeler", "controller")))
	saCfg, _ := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-labeler", nil)
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	waitLabelerPolicy(tCtx, t, cs, sa)
	tests := []struct {
		name   string
		labels map[string]string
		taints []v1.Taint
		// write: the taints the labeler writes.
		write   []v1.Taint
		allowed bool
		message string
	}{
		{name: "lift the startup taint from a node of a pool", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{otherTaint, startupTaint}, write: []v1.Taint{otherTaint}, allowed: true},
		{name: "lift the only taint", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{startupTaint}, write: []v1.Taint{}, allowed: true},
		{name: "remove another taint", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{otherTaint, startupTaint}, write: []v1.Taint{startupTaint}, message: "may remove only the startup taint"},
		{name: "remove both", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{otherTaint, startupTaint}, write: []v1.Taint{}, message: "may remove only the startup taint"},
		{name: "add a taint", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{startupTaint}, write: []v1.Taint{startupTaint, otherTaint}, message: "may remove only the startup taint"},
		{name: "add the startup taint", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{otherTaint}, write: []v1.Taint{otherTaint, startupTaint}, message: "may remove only the startup taint"},
		{name: "change the startup taint's effect", labels: map[string]string{poolKey: "spot"},
			taints: []v1.Taint{startupTaint}, write: []v1.Taint{{Key: startupTaint.Key, Value: startupTaint.Value, Effect: v1.TaintEffectNoExecute}}, message: "may remove only the startup taint"},
		{name: "lift the startup taint from a node of no pool", labels: nil,
			taints: []v1.Taint{startupTaint}, write: []v1.Taint{}, message: "only from a node of a pool"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "policy-" + string(rune('a'+i))
			util.CreateNode(tCtx, t, cs, util.Node(name, tt.labels).Taints(tt.taints).Obj())
			patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": tt.write}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = sa.CoreV1().Nodes().Patch(tCtx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			switch {
			case tt.allowed && err != nil:
				t.Errorf("refused: %v", err)
			case !tt.allowed && err == nil:
				t.Errorf("allowed, want refused (%q)", tt.message)
			case !tt.allowed && (!apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.message)):
				t.Errorf("%v, want refused by the policy (%q)", err, tt.message)
			}
		})
	}
}

func waitNodeCheck(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, name, what string, check func(*v1.Node) bool) *v1.Node {
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
		t.Fatalf("node %s: %s: timed out; %+v", name, what, node)
	}
	return node
}

func patchNode(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, name, patch string) {
	t.Helper()
	if _, err := cs.CoreV1().Nodes().Patch(tCtx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching node %s: %v", name, err)
	}
}

// TestStartupTaintNoDebris (#46): whatever happens to a node after it joined, the startup taint
// and the condition PoolLabelsApplied end as its labels say: the taint, a startup taint, is never
// put back (NodePoolReady holds the pods it places, the condition says False); the condition is
// kept on nodes of pools with a set in view and removed from every other node.
func TestStartupTaintNoDebris(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const ns = "pool-scheduler"
	_, stop, run := startInstalledLabeler(tCtx, t, cp)
	gold := map[string]string{"example.com/tier": "gold"}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "other", map[string]string{"example.com/tier": "bronze"}))

	tests := []struct {
		name string
		// extra labels the node joins with (someone else's); held: the node is held at first.
		extra map[string]string
		held  bool
		// change is what happens once the node is judged.
		change func(t *testing.T, pool, node string)
		// the end: the condition's status and reason ("" status: no condition), and whether
		// the startup taint is still there.
		wantStatus v1.ConditionStatus
		wantReason string
		wantTaint  bool
		// wantPool is the pool the condition names (default: the node's own), wantLabels labels
		// the node must carry at the end.
		wantPool   string
		wantLabels map[string]string
	}{
		{name: "the set comes to want a value someone else holds",
			change: func(t *testing.T, p, node string) {
				patchNode(tCtx, t, cs, node, `{"metadata":{"labels":{"example.com/zone":"a"}}}`)
				util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, p, map[string]string{"example.com/tier": "gold", "example.com/zone": "b"}))
			},
			wantStatus: v1.ConditionFalse, wantReason: "WrongValue"},
		{name: "the set changes a value: relabelled",
			change: func(t *testing.T, p, node string) {
				util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, p, map[string]string{"example.com/tier": "silver"}))
			},
			wantStatus: v1.ConditionTrue, wantReason: "LabelsApplied", wantLabels: map[string]string{"example.com/tier": "silver"}},
		{name: "the set is deleted while the node is held: released, condition removed",
			extra: map[string]string{"example.com/tier": "iron"}, held: true,
			change: func(t *testing.T, p, node string) { util.DeleteLabelSet(tCtx, t, cp, ns, p) }},
		{name: "the set is deleted after the node joined: condition removed",
			change: func(t *testing.T, p, node string) { util.DeleteLabelSet(tCtx, t, cp, ns, p) }},
		{name: "the node moves to another pool with a set",
			change: func(t *testing.T, p, node string) {
				patchNode(tCtx, t, cs, node, `{"metadata":{"labels":{"`+poolKey+`":"other"}}}`)
			},
			wantStatus: v1.ConditionTrue, wantReason: "LabelsApplied", wantPool: "other", wantLabels: map[string]string{"example.com/tier": "bronze"}},
		{name: "the node moves to a pool without a set: condition removed",
			change: func(t *testing.T, p, node string) {
				patchNode(tCtx, t, cs, node, `{"metadata":{"labels":{"`+poolKey+`":"no-set"}}}`)
			}},
		{name: "the node leaves every pool: condition removed",
			change: func(t *testing.T, p, node string) {
				patchNode(tCtx, t, cs, node, `{"metadata":{"labels":{"`+poolKey+`":null}}}`)
			}},
		{name: "the labeler is down when the node joins, and back",
			change: func(t *testing.T, p, node string) {},
			// The node joins below with the labeler stopped (see the loop).
			wantStatus: v1.ConditionTrue, wantReason: "LabelsApplied"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fmt.Sprintf("debris-%d", i)
			node := p + "-0"
			util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, p, gold))
			labels := map[string]string{poolKey: p}
			for k, v := range tt.extra {
				labels[k] = v
			}
			down := strings.HasPrefix(tt.name, "the labeler is down")
			if down {
				stop()
			}
			util.CreateNode(tCtx, t, cs, util.Node(node, labels).Taints([]v1.Taint{startupTaint}).Obj())
			if down {
				stop = run()
			}
			if tt.held {
				waitNodeCheck(tCtx, t, cs, node, "held: condition False, taint kept", func(n *v1.Node) bool {
					return conditionIs(n, v1.ConditionFalse, "WrongValue") && hasTaint(n, pool.StartupTaintKey)
				})
			} else {
				waitNodeCheck(tCtx, t, cs, node, "joined: condition True, taint lifted", func(n *v1.Node) bool {
					return conditionIs(n, v1.ConditionTrue, "LabelsApplied") && !hasTaint(n, pool.StartupTaintKey)
				})
			}
			tt.change(t, p, node)
			wantPool := tt.wantPool
			if wantPool == "" {
				wantPool = p
			}
			n := waitNodeCheck(tCtx, t, cs, node, "the end the labels say", func(n *v1.Node) bool {
				c := condition(n)
				if hasTaint(n, pool.StartupTaintKey) != tt.wantTaint || !carries(n, tt.wantLabels) {
					return false
				}
				if tt.wantStatus == "" {
					return c == nil
				}
				return c != nil && c.Status == tt.wantStatus && c.Reason == tt.wantReason && strings.HasPrefix(c.Message, "pool "+wantPool+":")
			})
			t.Logf("end: taints %v condition %+v", taintKeys(n), condition(n))
		})
	}
}

// TestStartupTaintJoinRace (#46): pods of the default scheduler, pinned to a pool, stream in
// while the pool's nodes join with the startup taint and get their labels a second later (the
// labeler starts then): none binds to a node before its labels. Degraded mode keeps the gate:
// the same with pool-scheduler down, the hand-off's admission policy (as shipped, switch off)
// leaving the pods of an opted-in namespace to the default scheduler.
func TestStartupTaintJoinRace(t *testing.T) {
	modes, err := simulate.Modes()
	if err != nil {
		t.Fatal(err)
	}
	defaultProfile := modes[0].Profile
	if defaultProfile.SchedulerName != v1.DefaultSchedulerName {
		t.Fatalf("profile %s, want the default scheduler's", defaultProfile.SchedulerName)
	}
	want := map[string]string{"example.com/gpu": "a100"}
	tests := []struct {
		name     string
		degraded bool
	}{
		{name: "the default scheduler's pods"},
		{name: "degraded mode: pool-scheduler down, pods left to the default scheduler", degraded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			cp := util.StartControlPlane(t)
			cs := cp.Client
			const ns = "pool-scheduler"
			if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "gpu", want))
			util.StartScheduler(t, cp, defaultProfile)
			podNS := util.CreateNamespace(tCtx, t, cs, "race")
			if tt.degraded {
				objs := util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "admission", "policy"))
				for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "handoff")) {
					if o.GetKind() == "ConfigMap" {
						objs = append(objs, o) // the switch, shipped "false": no healthy leader
					}
				}
				if err := util.CreateObjects(tCtx, cp, objs); err != nil {
					t.Fatal(err)
				}
				podNS, _ = createOptedInNamespaces(tCtx, t, cs)
				waitForPolicy(tCtx, t, cs, podNS, func(p *v1.Pod) bool {
					return p.Spec.Affinity != nil && p.Spec.SchedulerName == v1.DefaultSchedulerName
				})
			}
			startLabeler := sync.OnceFunc(func() { startInstalledLabeler(tCtx, t, cp) })
			r := util.JoinRaceWith(tCtx, t, cp, podNS, "gpu", 2, want, func(string) { startLabeler() },
				util.JoinRaceOptions{SchedulerName: v1.DefaultSchedulerName, Taints: []v1.Taint{startupTaint}})
			if len(r.Early) > 0 {
				t.Errorf("pods bound to nodes before their labels: %q", r.Early)
			}
			t.Logf("%s", r)
		})
	}
}
