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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestLabelSetStatusSaysWhy: the labeler, given the scheduler's NodePoolReady args, writes in
// each set's status how many of the pool's nodes the scheduler accepts and which it holds and
// why (at most 20, by name); the scheduler, running the same args, binds a pod to the node the
// status calls ready and not to the held ones; a node held longer than --hold-warning-after gets
// a Warning event, and the held-node metrics count holds per pool and reason.
func TestLabelSetStatusSaysWhy(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "status")
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")

	// The shipped profile with a required key: the scheduler runs it, the labeler judges by it.
	profile := util.LoadShippedConfig(t).Profiles[0]
	args := util.PluginArgs(t, &profile, nodepoolready.Name).(*config.NodePoolReadyArgs)
	args.RequiredLabelKeys = []string{updateDomainKey}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "spot", map[string]string{"example.com/a": "1"}))
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "big", map[string]string{"example.com/b": "1"}))
	util.StartScheduler(t, cp, profile)
	util.StartLabeler(t, cp, labeler.Options{Gate: pool.NewGate(args), HoldWarningAfter: time.Second})

	// spot-0 lacks the required key; spot-1 is ready once labelled; someone else set spot-2's
	// example.com/a (a conflict the labeler leaves alone).
	util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot"}).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("spot-1", map[string]string{poolKey: "spot", updateDomainKey: "0"}).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("spot-2", map[string]string{poolKey: "spot", updateDomainKey: "1", "example.com/a": "2"}).Obj())
	for i := range 22 {
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("big-%02d", i), map[string]string{poolKey: "big"}).Obj())
	}
	for _, n := range []string{"spot-0", "spot-1", "spot-2"} {
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, n+"-pod").NodeSelector(map[string]string{v1.LabelHostname: n}).Obj())
	}

	t.Run("ready and held nodes, with why", func(t *testing.T) {
		// (Until the labeler has labelled spot-0, it is held for the missing label instead.)
		set := waitLabelSetStatus(t, tCtx, cp, ns, "spot", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.NodesMatched == 3 && s.NodesReady == 1 && s.NodesHeld == 2 && s.HeldNodes[0].Reason == labelsv1alpha1.HeldMissingRequiredLabel
		})
		var got []labelsv1alpha1.HeldNode
		for _, h := range set.Status.HeldNodes {
			if h.Since.IsZero() {
				t.Errorf("held node %s has no since", h.Name)
			}
			h.Since = metav1.Time{}
			got = append(got, h)
		}
		want := []labelsv1alpha1.HeldNode{
			{Name: "spot-0", Reason: labelsv1alpha1.HeldMissingRequiredLabel, Key: updateDomainKey},
			{Name: "spot-2", Reason: labelsv1alpha1.HeldWrongValue, Key: "example.com/a", Want: "1", Got: "2"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("held nodes (-want +got):\n%s", diff)
		}
		c := meta.FindStatusCondition(set.Status.Conditions, labeler.ConditionNodesReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spot-0") || !strings.Contains(c.Message, "spot-2") {
			t.Errorf("NodesReady condition %+v, want False naming spot-0 and spot-2", c)
		}
	})

	t.Run("the scheduler agrees with the status", func(t *testing.T) {
		util.WaitForPodBound(tCtx, t, cs, podNS, "spot-1-pod", bindTimeout)
		// (The message may still name the label the labeler has applied since: the scheduler does
		// not retry a pod while its node stays held, rightly.)
		for _, p := range []string{"spot-0-pod", "spot-2-pod"} {
			util.WaitForPodUnschedulable(tCtx, t, cs, podNS, p, "", bindTimeout)
			if pod, err := cs.CoreV1().Pods(podNS).Get(tCtx, p, metav1.GetOptions{}); err != nil || pod.Spec.NodeName != "" {
				t.Errorf("%s bound to %q (%v): its node is held", p, pod.Spec.NodeName, err)
			}
		}
	})

	t.Run("the list is bounded, the count is not", func(t *testing.T) {
		set := waitLabelSetStatus(t, tCtx, cp, ns, "big", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.NodesMatched == 22 && s.NodesHeld == 22
		})
		var names []string
		for _, h := range set.Status.HeldNodes {
			names = append(names, h.Name)
		}
		var want []string
		for i := range 20 {
			want = append(want, fmt.Sprintf("big-%02d", i))
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("held nodes listed (-want +got):\n%s", diff)
		}
	})

	t.Run("a node held too long gets a Warning event", func(t *testing.T) {
		ev := waitEvent(tCtx, t, cs, "default", "Node", "spot-0", "NodeHeld")
		if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "pool spot") || !strings.Contains(ev.Message, updateDomainKey) {
			t.Errorf("NodeHeld event %q (%s), want a Warning naming the pool and the key", ev.Message, ev.Type)
		}
	})

	t.Run("held nodes per pool and reason, and the oldest hold's age", func(t *testing.T) {
		want := map[string]float64{"spot/MissingRequiredLabel": 1, "spot/WrongValue": 1, "big/MissingRequiredLabel": 22}
		var got map[string]float64
		var age map[string]float64
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(context.Context) (bool, error) {
			got, age = heldMetrics(t)
			return cmp.Equal(want, got), nil
		})
		if err != nil {
			t.Fatalf("pool_labeler_held_nodes (-want +got):\n%s", cmp.Diff(want, got))
		}
		if age["spot"] <= 0 || age["big"] <= 0 {
			t.Errorf("pool_labeler_oldest_hold_seconds = %v, want a positive age for spot and big", age)
		}
	})

	t.Run("a node that becomes ready leaves the list", func(t *testing.T) {
		util.PatchNode(tCtx, t, cs, "spot-0", fmt.Sprintf(`{"metadata":{"labels":{%q:"2"}}}`, updateDomainKey))
		set := waitLabelSetStatus(t, tCtx, cp, ns, "spot", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.NodesReady == 2 && s.NodesHeld == 1
		})
		if len(set.Status.HeldNodes) != 1 || set.Status.HeldNodes[0].Name != "spot-2" {
			t.Errorf("held nodes %+v, want only spot-2", set.Status.HeldNodes)
		}
		util.WaitForPodBound(tCtx, t, cs, podNS, "spot-0-pod", bindTimeout)
	})
}

// waitEvent waits for an event about the object with the reason and returns it.
func waitEvent(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, namespace, kind, name, reason string) *v1.Event {
	t.Helper()
	var found *v1.Event
	err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			e := &list.Items[i]
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on %s %s/%s: %v", reason, kind, namespace, name, err)
	}
	return found
}

// heldMetrics reads pool_labeler_held_nodes ("pool/reason") and pool_labeler_oldest_hold_seconds
// (by pool) from the labeler's registry.
func heldMetrics(t *testing.T) (held, age map[string]float64) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	held, age = map[string]float64{}, map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "pool_labeler_held_nodes":
				held[labels["pool"]+"/"+labels["reason"]] = m.GetGauge().GetValue()
			case "pool_labeler_oldest_hold_seconds":
				age[labels["pool"]] = m.GetGauge().GetValue()
			}
		}
	}
	return held, age
}
