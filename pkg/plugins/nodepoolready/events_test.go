package nodepoolready

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

func TestIsSchedulableAfterNodeChange(t *testing.T) {
	spot := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	unlabelled := st.MakeNode().Name("n").Label(poolKey, "spot").Obj()
	ready := st.MakeNode().Name("n").Label(poolKey, "spot").Label("example.com/a", "1").Obj()
	readyOtherChange := st.MakeNode().Name("n").Label(poolKey, "spot").Label("example.com/a", "1").Label("x", "y").Obj()
	stale := st.MakeNode().Name("n").Label(poolKey, "spot").Label("example.com/a", "1").Label("example.com/old", "1").Obj()
	stale.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/a","example.com/old"]`}
	staleFixed := stale.DeepCopy()
	staleFixed.Annotations[pool.ManagedLabelsAnnotation] = `["example.com/a"]`

	elsewhere := st.MakePod().NodeSelector(map[string]string{"example.com/a": "2"}).Obj()
	avoidsSpot := st.MakePod().NodeAffinityNotIn("example.com/a", []string{"1"}).Obj()
	wantsSpot := st.MakePod().NodeSelector(map[string]string{"example.com/a": "1"}).Obj()
	wantsFeature := st.MakePod().NodeSelector(map[string]string{"example.com/gpu": "true"}).Obj()
	readyWithFeature := ready.DeepCopy()
	readyWithFeature.Labels["example.com/gpu"] = "true"

	tests := []struct {
		name     string
		pod      *v1.Pod
		old, new *v1.Node
		want     fwk.QueueingHint
	}{
		// A pod that cannot use the node once it is ready is left alone: waking it would only
		// cost a scheduling cycle.
		{name: "labels landed, pod selects other labels", pod: elsewhere, old: unlabelled, new: ready, want: fwk.QueueSkip},
		{name: "labels landed, pod avoids the pool", pod: avoidsSpot, old: unlabelled, new: ready, want: fwk.QueueSkip},
		{name: "labels landed, pod selects the pool", pod: wantsSpot, old: unlabelled, new: ready, want: fwk.Queue},
		// The node was ready already but only now carries the label the pod selects: this plugin,
		// filtering first, may be the only one that refused the pod, so it must wake it.
		{name: "ready node gains the selected label", pod: wantsFeature, old: ready, new: readyWithFeature, want: fwk.Queue},
		{name: "ready node, status-only update", pod: wantsFeature, old: readyWithFeature, new: readyWithFeature.DeepCopy(), want: fwk.QueueSkip},
		{name: "ready node added", new: ready, want: fwk.Queue},
		{name: "unready node added", new: unlabelled, want: fwk.QueueSkip},
		{name: "labels landed", old: unlabelled, new: ready, want: fwk.Queue},
		{name: "still not ready", old: unlabelled, new: unlabelled.DeepCopy(), want: fwk.QueueSkip},
		{name: "already ready before", old: ready, new: readyOtherChange, want: fwk.QueueSkip},
		{name: "became not ready", old: ready, new: unlabelled, want: fwk.QueueSkip},
		{name: "annotation update drops the stale key", old: stale, new: staleFixed, want: fwk.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, defaultArgs(), spot)
			var oldObj any
			if tt.old != nil {
				oldObj = tt.old
			}
			pod := tt.pod
			if pod == nil {
				pod = st.MakePod().Obj()
			}
			got, err := pl.isSchedulableAfterNodeChange(logger, pod, oldObj, tt.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func toUnstructured(t *testing.T, set *labelsv1alpha1.NodePoolLabelSet) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(set)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// TestIsSchedulableAfterLabelSetChange: the hint decides from the objects it is given and leaves
// the plugin's state alone (the scheduler calls it once per waiting pod, and not at all when no
// pod waits): the label-set index is the plugin informer's.
func TestIsSchedulableAfterLabelSetChange(t *testing.T) {
	v1set := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	v2set := labelSet("ns", "spot", "u1", 2, map[string]labelsv1alpha1.LabelValue{"example.com/a": "2"})
	statusOnly := v1set.DeepCopy()
	statusOnly.Status.State = labelsv1alpha1.SyncStateSynced
	deleting := v1set.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	otherNS := labelSet("other", "spot", "u9", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})

	tests := []struct {
		name      string
		namespace string
		old, new  *labelsv1alpha1.NodePoolLabelSet
		want      fwk.QueueingHint
	}{
		{name: "labels changed", old: v1set, new: v2set, want: fwk.Queue},
		{name: "status-only update", old: v1set, new: statusOnly, want: fwk.QueueSkip},
		{name: "deletion started", old: v1set, new: deleting, want: fwk.Queue},
		{name: "added", new: v2set, want: fwk.Queue},
		{name: "deleted", old: v1set, want: fwk.Queue},
		{name: "other namespace when one is watched", namespace: "ns", old: nil, new: otherNS, want: fwk.QueueSkip},
		{name: "deleted in another namespace when one is watched", namespace: "ns", old: otherNS, want: fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			args := defaultArgs()
			if tt.namespace != "" {
				args.LabelSetNamespaces = []string{tt.namespace}
			}
			// The plugin's own informer has seen v1 only.
			pl := newTestPlugin(t, args, v1set)
			before := pl.labelSets.current()
			var oldObj, newObj any
			if tt.old != nil {
				oldObj = toUnstructured(t, tt.old)
			}
			if tt.new != nil {
				newObj = toUnstructured(t, tt.new)
			}
			got, err := pl.isSchedulableAfterLabelSetChange(logger, st.MakePod().Obj(), oldObj, newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
			if after := pl.labelSets.current(); after != before {
				value, _ := after.Pool("spot").Desired("example.com/a")
				t.Errorf("the hint changed the label-set index: example.com/a = %q, want the informer's %q", value, "1")
			}
		})
	}
}

// TestPostFilterActivatesWhenSetsChangedDuringCycle: a cycle that judged nodes by label sets the
// plugin's informer has since replaced retries the pod at once, whichever of the plugin's
// informer and the scheduler's saw the change first.
func TestPostFilterActivatesWhenSetsChangedDuringCycle(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	h := &plugintest.Activator{}
	pl.handle = h
	pod := st.MakePod().Namespace("default").Name("p").Obj()

	state := framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, nil); !status.IsSuccess() {
		t.Fatal(status)
	}
	pl.PostFilter(ctx, state, pod, nil)
	if got := h.Take(); len(got) != 0 {
		t.Errorf("activated %v although the sets did not change", got)
	}

	state = framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, nil); !status.IsSuccess() {
		t.Fatal(status)
	}
	pl.labelSets.upsert(logger, labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}))
	pl.PostFilter(ctx, state, pod, nil)
	if diff := cmp.Diff([]string{"default/p"}, h.Take()); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
}

func TestEventsToRegister(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	events, err := newTestPlugin(t, defaultArgs()).EventsToRegister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var node, labelSets bool
	for _, e := range events {
		if e.QueueingHintFn == nil {
			t.Errorf("event %v has no queueing hint", e.Event)
		}
		switch e.Event.Resource {
		case fwk.Node:
			node = e.Event.ActionType&fwk.Add != 0 && e.Event.ActionType&fwk.UpdateNodeLabel != 0 && e.Event.ActionType&fwk.UpdateNodeAnnotation != 0
		case fwk.EventResource("nodepoollabelsets.v1alpha1.labels.banzaicloud.io"):
			labelSets = e.Event.ActionType&(fwk.Add|fwk.Update|fwk.Delete) == fwk.Add|fwk.Update|fwk.Delete
		}
	}
	if !node || !labelSets {
		t.Errorf("registered events %v: want node add/label/annotation and NodePoolLabelSet add/update/delete", events)
	}
}
