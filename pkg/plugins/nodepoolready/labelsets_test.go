package nodepoolready

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

func desired(idx *labelSetIndex, poolName string) []pool.Label {
	p := idx.current().Pool(poolName)
	if p == nil {
		return nil
	}
	return p.Labels
}

func TestLabelSetIndexOrdering(t *testing.T) {
	v1 := map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}
	v2 := map[string]labelsv1alpha1.LabelValue{"example.com/a": "2"}
	tests := []struct {
		name string
		ops  func(logger klog.Logger, idx *labelSetIndex)
		want []pool.Label
	}{
		{
			name: "newer generation wins",
			ops: func(l klog.Logger, idx *labelSetIndex) {
				idx.upsert(l, labelSet("ns", "spot", "u1", 1, v1))
				idx.upsert(l, labelSet("ns", "spot", "u1", 2, v2))
			},
			want: []pool.Label{{Key: "example.com/a", Value: "2"}},
		},
		{
			name: "older generation from a lagging feed is ignored",
			ops: func(l klog.Logger, idx *labelSetIndex) {
				idx.upsert(l, labelSet("ns", "spot", "u1", 2, v2))
				idx.upsert(l, labelSet("ns", "spot", "u1", 1, v1))
			},
			want: []pool.Label{{Key: "example.com/a", Value: "2"}},
		},
		{
			name: "deleted set is not brought back by a lagging update",
			ops: func(l klog.Logger, idx *labelSetIndex) {
				idx.upsert(l, labelSet("ns", "spot", "u1", 1, v1))
				idx.remove(l, labelSet("ns", "spot", "u1", 1, v1))
				idx.upsert(l, labelSet("ns", "spot", "u1", 2, v2))
			},
			want: nil,
		},
		{
			name: "recreated set replaces the old one, and the old UID stays gone",
			ops: func(l klog.Logger, idx *labelSetIndex) {
				idx.upsert(l, labelSet("ns", "spot", "u1", 1, v1))
				idx.upsert(l, labelSet("ns", "spot", "u2", 1, v2))
				idx.upsert(l, labelSet("ns", "spot", "u1", 3, v1))
			},
			want: []pool.Label{{Key: "example.com/a", Value: "2"}},
		},
		{
			name: "delete of an old UID keeps the new set",
			ops: func(l klog.Logger, idx *labelSetIndex) {
				idx.upsert(l, labelSet("ns", "spot", "u2", 1, v2))
				idx.remove(l, labelSet("ns", "spot", "u1", 1, v1))
			},
			want: []pool.Label{{Key: "example.com/a", Value: "2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			idx := newLabelSetIndex(nil)
			tt.ops(logger, idx)
			if diff := cmp.Diff(tt.want, desired(idx, "spot")); diff != "" {
				t.Errorf("desired labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLabelSetIndexReportsChanges(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	idx := newLabelSetIndex(nil)
	set := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	if !idx.upsert(logger, set) {
		t.Error("first upsert reported no change")
	}
	if idx.upsert(logger, set) {
		t.Error("same object again reported a change")
	}
	statusOnly := set.DeepCopy()
	statusOnly.Generation = 2
	statusOnly.Status.State = labelsv1alpha1.SyncStateSynced
	if idx.upsert(logger, statusOnly) {
		t.Error("a generation bump without a label change reported a change")
	}
	if !idx.remove(logger, set) || idx.current().Len() != 0 {
		t.Error("remove did not drop the set")
	}
}

func TestLabelSetFromMalformedUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": labelsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "NodePoolLabelSet",
		"metadata":   map[string]any{"name": "spot", "namespace": "ns", "uid": "u1", "generation": int64(3)},
		"spec":       map[string]any{"labels": "not a map"},
	}}
	got := labelSetFromUnstructured(u)
	if got.Name != "spot" || got.Namespace != "ns" || got.UID != "u1" || got.Generation != 3 || len(got.Spec.Labels) != 0 {
		t.Errorf("malformed set converted to %+v, want identity kept and no labels", got)
	}
	good := labelSet("ns", "gpu", "u2", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(good)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(good, labelSetFromUnstructured(&unstructured.Unstructured{Object: obj})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestLabelSetIndexLabelledPools: the index publishes a new view only when a pool without a set
// in view starts or stops being labelled, and reports the pools that start.
func TestLabelSetIndexLabelledPools(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	idx := newLabelSetIndex([]string{"pool-scheduler"})
	var reported []string
	idx.onNotVisible = func(pools []string, node string) { reported = append(reported, fmt.Sprint(pools, "@", node)) }
	idx.upsert(logger, labelSet("pool-scheduler", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}))
	labelled := func(name, p string) *v1.Node {
		return st.MakeNode().Name(name).Label(poolKey, p).Annotation(pool.ManagedLabelsAnnotation, `["example.com/b"]`).Obj()
	}
	unlabelled := func(name, p string) *v1.Node {
		return st.MakeNode().Name(name).Label(poolKey, p).Annotation(pool.ManagedLabelsAnnotation, `[]`).Obj()
	}
	steps := []struct {
		name           string
		do             func() bool
		wantChanged    bool
		wantNotVisible []string
	}{
		{name: "a labelled node of a pool with a set in view", do: func() bool { return idx.observeNode(labelled("spot-0", "spot")) }},
		{name: "an unlabelled node of another pool", do: func() bool { return idx.observeNode(unlabelled("pool1-0", "pool1")) }},
		{name: "the first labelled node of pool1", do: func() bool { return idx.observeNode(labelled("pool1-1", "pool1")) }, wantChanged: true, wantNotVisible: []string{"pool1"}},
		{name: "a second one", do: func() bool { return idx.observeNode(labelled("pool1-2", "pool1")) }, wantNotVisible: []string{"pool1"}},
		{name: "the first one deleted", do: func() bool { return idx.forgetNode("pool1-1") }, wantNotVisible: []string{"pool1"}},
		{name: "the last one moves to pool2", do: func() bool { return idx.observeNode(labelled("pool1-2", "pool2")) }, wantChanged: true, wantNotVisible: []string{"pool2"}},
		{name: "its labels removed", do: func() bool { return idx.observeNode(unlabelled("pool1-2", "pool2")) }, wantChanged: true},
		{name: "pool2 labelled again, then its set arrives", do: func() bool {
			idx.observeNode(labelled("pool2-0", "pool2"))
			return idx.upsert(logger, labelSet("pool-scheduler", "pool2", "u2", 1, map[string]labelsv1alpha1.LabelValue{"example.com/b": "1"}))
		}, wantChanged: true},
	}
	for _, s := range steps {
		before := idx.current()
		if got := s.do(); got != s.wantChanged {
			t.Errorf("%s: changed = %v, want %v", s.name, got, s.wantChanged)
		}
		if s.wantChanged == (idx.current() == before) {
			t.Errorf("%s: a new view published = %v, want %v", s.name, idx.current() != before, s.wantChanged)
		}
		if diff := cmp.Diff(s.wantNotVisible, idx.current().NotVisible()); diff != "" {
			t.Errorf("%s: NotVisible (-want +got):\n%s", s.name, diff)
		}
	}
	if diff := cmp.Diff([]string{"[pool1]@pool1-1", "[pool2]@pool1-2", "[pool2]@pool2-0"}, reported); diff != "" {
		t.Errorf("reported (-want +got):\n%s", diff)
	}
}

// TestLabelSetIndexDeletedSet: a set in view deleted while its pool's nodes carry its labels
// leaves them stale (held), not "labelled from a set out of view", until the labeler has
// removed them; a set of the pool elsewhere in view, or back, ends it.
func TestLabelSetIndexDeletedSet(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	idx := newLabelSetIndex(nil)
	var reported []string
	idx.onNotVisible = func(pools []string, _ string) { reported = append(reported, pools...) }
	spot := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/b": "1"})
	idx.upsert(logger, spot)
	labelled := st.MakeNode().Name("spot-0").Label(poolKey, "spot").Label("example.com/b", "1").
		Annotation(pool.ManagedLabelsAnnotation, `["example.com/b"]`).Obj()
	fresh := st.MakeNode().Name("spot-1").Label(poolKey, "spot").Obj()
	idx.observeNode(labelled)
	gate := pool.Gate{}
	check := func(n *v1.Node) pool.Cause { return gate.Check(n.Labels, n.Annotations, idx.current()).Cause }

	idx.remove(logger, spot)
	if got := check(labelled); got != pool.StaleLabel {
		t.Errorf("labelled node after its set was deleted: %v, want %v", got, pool.StaleLabel)
	}
	if got := check(fresh); got != pool.Ready {
		t.Errorf("new node after the set was deleted: %v, want %v", got, pool.Ready)
	}
	if len(reported) > 0 || idx.current().NotVisible() != nil {
		t.Errorf("a deleted set reported as out of view: %q %q", reported, idx.current().NotVisible())
	}
	// The labeler removes the labels and writes [].
	cleaned := st.MakeNode().Name("spot-0").Label(poolKey, "spot").Annotation(pool.ManagedLabelsAnnotation, `[]`).Obj()
	if !idx.observeNode(cleaned) {
		t.Error("cleanup of the last labelled node published no new view")
	}
	// Labelled again later (another labeler, a set out of view): that is out of view now.
	idx.observeNode(labelled)
	if got := check(fresh); got != pool.LabelSetNotVisible {
		t.Errorf("new node of a pool labelled again: %v, want %v", got, pool.LabelSetNotVisible)
	}
	// A set in view is back: judged by it.
	idx.upsert(logger, labelSet("ns", "spot", "u2", 1, map[string]labelsv1alpha1.LabelValue{"example.com/b": "1"}))
	if got := check(labelled); got != pool.Ready {
		t.Errorf("labelled node with its set back: %v, want %v", got, pool.Ready)
	}
}
