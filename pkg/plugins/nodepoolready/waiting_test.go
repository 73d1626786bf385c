package nodepoolready

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

func TestInformerChangeRetriesWaitingPods(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	h := &plugintest.Activator{}
	pl.handle = h
	pl.labelSets.onInformerChange = func() { pl.activateWaiting(logger) }

	pod := st.MakePod().Namespace("default").Name("waiting").Obj()
	if _, status := pl.PostFilter(ctx, framework.NewCycleState(), pod, nil); status.IsSuccess() {
		t.Fatal("PostFilter claimed to make the pod schedulable")
	}
	// A status-only change does not retry anything; a label change does, once.
	set := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	if pl.labelSets.upsert(logger, set) {
		pl.labelSets.informerChanged()
	}
	if diff := cmp.Diff([]string{"default/waiting"}, h.Take()); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
	if pl.labelSets.upsert(logger, set) {
		pl.labelSets.informerChanged()
	}
	pl.activateWaiting(logger)
	if len(h.Activated()) != 0 {
		t.Errorf("pods activated twice: %v", h.Activated())
	}
}

// TestNodeBecomingReadyRetriesWaitingPods: pods that found no node are activated when a node they
// may use becomes ready (or joins ready), whichever plugin refused them; pods whose node affinity
// excludes the node stay remembered for a later node.
func TestNodeBecomingReadyRetriesWaitingPods(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	set := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	pl := newTestPlugin(t, defaultArgs(), set)
	pl.reactivateAfter = 0 // TestNodeReadyActivatesTwice covers the second activation.
	h := &plugintest.Activator{}
	pl.handle = h
	handler := pl.nodeReadyHandler(logger)

	wantsSpot := st.MakePod().Namespace("default").Name("wants-spot").NodeSelector(map[string]string{"example.com/a": "1"}).Obj()
	avoidsSpot := st.MakePod().Namespace("default").Name("avoids-spot").NodeAffinityNotIn("example.com/a", []string{"1"}).Obj()
	for _, pod := range []*v1.Pod{wantsSpot, avoidsSpot} {
		pl.PostFilter(ctx, framework.NewCycleState(), pod, nil)
	}
	unlabelled := st.MakeNode().Name("spot-0").Label(poolKey, "spot").Obj()
	ready := st.MakeNode().Name("spot-0").Label(poolKey, "spot").Label("example.com/a", "1").Obj()

	handler.OnAdd(unlabelled, false)
	if got := h.Take(); len(got) != 0 {
		t.Fatalf("an unready node joining activated %v", got)
	}
	handler.OnUpdate(unlabelled, ready)
	if diff := cmp.Diff([]string{"default/wants-spot"}, h.Take()); diff != "" {
		t.Errorf("activated when the labels landed (-want +got):\n%s", diff)
	}
	// An update that leaves the labels alone changes nothing; a general node joining ready
	// admits the pod that avoids spot.
	handler.OnUpdate(ready, ready.DeepCopy())
	if got := h.Take(); len(got) != 0 {
		t.Errorf("a status-only update of a ready node activated %v", got)
	}
	handler.OnAdd(st.MakeNode().Name("general-0").Label(poolKey, "general").Obj(), false)
	if diff := cmp.Diff([]string{"default/avoids-spot"}, h.Take()); diff != "" {
		t.Errorf("activated when a ready general node joined (-want +got):\n%s", diff)
	}

	// A ready node that gains the label a waiting pod selects wakes it too.
	wantsGPU := st.MakePod().Namespace("default").Name("wants-gpu").NodeSelector(map[string]string{"example.com/gpu": "true"}).Obj()
	pl.PostFilter(ctx, framework.NewCycleState(), wantsGPU, nil)
	withGPU := ready.DeepCopy()
	withGPU.Labels["example.com/gpu"] = "true"
	handler.OnUpdate(ready, withGPU)
	if diff := cmp.Diff([]string{"default/wants-gpu"}, h.Take()); diff != "" {
		t.Errorf("activated when a ready node gained the selected label (-want +got):\n%s", diff)
	}
}

// TestNodeReadyActivatesTwice: the pods are activated again shortly after a node became usable,
// in case the first activation was handled before the scheduler's cache had the node.
func TestNodeReadyActivatesTwice(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	pl.reactivateAfter = 10 * time.Millisecond
	h := &plugintest.Activator{}
	pl.handle = h
	pl.PostFilter(ctx, framework.NewCycleState(), st.MakePod().Namespace("default").Name("p").Obj(), nil)
	pl.nodeReadyHandler(logger).OnAdd(st.MakeNode().Name("n").Label(poolKey, "general").Obj(), false)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(h.Activated()) == 2, nil
	})
	if err != nil {
		t.Fatalf("activations: %v, want the pod twice", h.Take())
	}
	if diff := cmp.Diff([]string{"default/p", "default/p"}, h.Take()); diff != "" {
		t.Errorf("activations (-want +got):\n%s", diff)
	}
}
