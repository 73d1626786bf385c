package labeler

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

func desired(labels map[string]labelsv1alpha1.LabelValue) *pool.PoolLabels {
	return pool.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "spot"},
		Spec:       labelsv1alpha1.NodePoolLabelSetSpec{Labels: labels},
	}}).Pool("spot")
}

func TestPlanNode(t *testing.T) {
	spot := desired(map[string]labelsv1alpha1.LabelValue{"example.com/a": "1", "example.com/b": "2"})
	managed := func(v string) map[string]string { return map[string]string{pool.ManagedLabelsAnnotation: v} }
	// Two sets of pool dup disagree on example.com/shared: no value of it is desired.
	dup := pool.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "dup"}, Spec: labelsv1alpha1.NodePoolLabelSetSpec{Labels: map[string]labelsv1alpha1.LabelValue{"example.com/a": "1", "example.com/shared": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "dup"}, Spec: labelsv1alpha1.NodePoolLabelSetSpec{Labels: map[string]labelsv1alpha1.LabelValue{"example.com/shared": "b"}}},
	}).Pool("dup")
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		desired     *pool.PoolLabels
		overwrite   bool
		want        Plan
	}{
		{
			name:    "conflicting sets: a new node gets the agreed labels, not the conflicting key",
			labels:  map[string]string{"agentpool": "dup"},
			desired: dup,
			want:    Plan{Set: map[string]string{"example.com/a": "1"}, Annotation: `["example.com/a"]`, AnnotationChanged: true},
		},
		{
			// The labeler may not change pool-identity labels: one the Banzai operator managed
			// stays when its set is gone, still recorded as managed.
			name:        "a managed pool-identity label is never removed",
			labels:      map[string]string{"cloud.google.com/gke-nodepool": "pool1", "nodepool.banzaicloud.io/name": "pool1", "example.com/a": "1"},
			annotations: managed(`["example.com/a","nodepool.banzaicloud.io/name"]`),
			want:        Plan{Set: map[string]string{}, Remove: []string{"example.com/a"}, Annotation: `["nodepool.banzaicloud.io/name"]`, AnnotationChanged: true},
		},
		{
			// A set stored before the CRD refused the domain labeler's keys had the key recorded
			// as managed: it is neither written (the set's value is dropped) nor removed, and
			// leaves the annotation, so the domain labeler's value stays and is its own.
			name:        "a domain key a set named is neither written nor removed, and no longer managed",
			labels:      map[string]string{"agentpool": "flip", "example.com/a": "1", "topology.pool-scheduler.io/update-domain": "3"},
			annotations: managed(`["example.com/a","topology.pool-scheduler.io/update-domain"]`),
			desired: pool.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "flip"}, Spec: labelsv1alpha1.NodePoolLabelSetSpec{Labels: map[string]labelsv1alpha1.LabelValue{"example.com/a": "1", "topology.pool-scheduler.io/update-domain": "9"}}},
			}).Pool("flip"),
			want: Plan{Set: map[string]string{}, Annotation: `["example.com/a"]`, AnnotationChanged: true},
		},
		{
			name:        "conflicting sets: a managed conflicting key is kept, unchanged and still owned",
			labels:      map[string]string{"agentpool": "dup", "example.com/a": "1", "example.com/shared": "a"},
			annotations: managed(`["example.com/a","example.com/shared"]`),
			desired:     dup,
			want:        Plan{Set: map[string]string{}, Annotation: `["example.com/a","example.com/shared"]`},
		},
		{
			name:    "new node gets labels and annotation",
			labels:  map[string]string{"agentpool": "spot"},
			desired: spot,
			want: Plan{Set: map[string]string{"example.com/a": "1", "example.com/b": "2"},
				Annotation: `["example.com/a","example.com/b"]`, AnnotationChanged: true},
		},
		{
			name:        "in sync: nothing to do",
			labels:      map[string]string{"example.com/a": "1", "example.com/b": "2"},
			annotations: managed(`["example.com/a","example.com/b"]`),
			desired:     spot,
			want:        Plan{Set: map[string]string{}, Annotation: `["example.com/a","example.com/b"]`},
		},
		{
			name:        "drift: a label removed by hand comes back",
			labels:      map[string]string{"example.com/a": "1"},
			annotations: managed(`["example.com/a","example.com/b"]`),
			desired:     spot,
			want:        Plan{Set: map[string]string{"example.com/b": "2"}, Annotation: `["example.com/a","example.com/b"]`},
		},
		{
			name:        "drift: a managed label changed by hand is restored",
			labels:      map[string]string{"example.com/a": "9", "example.com/b": "2"},
			annotations: managed(`["example.com/a","example.com/b"]`),
			desired:     spot,
			want:        Plan{Set: map[string]string{"example.com/a": "1"}, Annotation: `["example.com/a","example.com/b"]`},
		},
		{
			name:        "label dropped from the set is removed",
			labels:      map[string]string{"example.com/a": "1", "example.com/b": "2", "example.com/old": "x"},
			annotations: managed(`["example.com/a","example.com/b","example.com/old"]`),
			desired:     spot,
			want: Plan{Set: map[string]string{}, Remove: []string{"example.com/old"},
				Annotation: `["example.com/a","example.com/b"]`, AnnotationChanged: true},
		},
		{
			name:        "deleted set: every managed label is removed",
			labels:      map[string]string{"example.com/a": "1", "example.com/b": "2", "team": "x"},
			annotations: managed(`["example.com/a","example.com/b"]`),
			desired:     nil,
			want: Plan{Set: map[string]string{}, Remove: []string{"example.com/a", "example.com/b"},
				Annotation: `[]`, AnnotationChanged: true},
		},
		{
			name:    "labels it does not own are never touched; an equal value set by someone else stays theirs",
			labels:  map[string]string{"team": "x", "example.com/a": "1"},
			desired: spot,
			want: Plan{Set: map[string]string{"example.com/b": "2"},
				Annotation: `["example.com/b"]`, AnnotationChanged: true},
		},
		{
			name:        "a label someone else set to the desired value is not removed when the set drops it",
			labels:      map[string]string{"example.com/a": "1", "example.com/b": "2", "example.com/gpu": "true"},
			annotations: managed(`["example.com/a","example.com/b"]`),
			desired:     spot,
			want:        Plan{Set: map[string]string{}, Annotation: `["example.com/a","example.com/b"]`},
		},
		{
			name:    "conflict: someone else's value is left alone",
			labels:  map[string]string{"example.com/a": "other"},
			desired: spot,
			want: Plan{Set: map[string]string{"example.com/b": "2"}, Annotation: `["example.com/b"]`, AnnotationChanged: true,
				Conflicts: []Conflict{{Key: "example.com/a", Want: "1", Got: "other"}}},
		},
		{
			name:      "conflict overwritten when asked",
			labels:    map[string]string{"example.com/a": "other"},
			desired:   spot,
			overwrite: true,
			want: Plan{Set: map[string]string{"example.com/a": "1", "example.com/b": "2"},
				Annotation: `["example.com/a","example.com/b"]`, AnnotationChanged: true},
		},
		{
			name:        "malformed annotation is repaired, nothing deleted on a guess",
			labels:      map[string]string{"example.com/a": "1", "example.com/b": "2", "example.com/old": "x"},
			annotations: managed(`["example.com/a",`),
			desired:     spot,
			want: Plan{Set: map[string]string{}, Annotation: `["example.com/a","example.com/b"]`,
				AnnotationChanged: true, MalformedAnnotation: true},
		},
		{
			name:    "node of a pool without a set and no annotation: untouched",
			labels:  map[string]string{"agentpool": "general"},
			desired: nil,
			want:    Plan{Set: map[string]string{}, Annotation: `[]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanNode(tt.labels, tt.annotations, tt.desired, tt.overwrite)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanNode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanNodeIgnoresRefusedKeys (#34): a set naming a label SystemPoolGuard's selector reads, or
// a reserved one, gets its other labels written: the admission policy refuses a write changing
// either, and with it every other label of the write. One recorded as managed is neither
// changed nor removed, and leaves the annotation.
func TestPlanNodeIgnoresRefusedKeys(t *testing.T) {
	g := &pool.Gate{SystemNodeKeys: []string{"kubernetes.azure.com/mode"}}
	set := g.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "user"},
		Spec: labelsv1alpha1.NodePoolLabelSetSpec{Labels: map[string]labelsv1alpha1.LabelValue{
			"example.com/a": "1", "kubernetes.azure.com/mode": "system", "node.kubernetes.io/role": "x",
		}},
	}}).Pool("user")
	tests := []struct {
		name                string
		labels, annotations map[string]string
		want                Plan
	}{
		{
			name:   "a new node gets the other labels",
			labels: map[string]string{"agentpool": "user"},
			want:   Plan{Set: map[string]string{"example.com/a": "1"}, Annotation: `["example.com/a"]`, AnnotationChanged: true},
		},
		{
			name:        "refused keys recorded as managed stay and leave the annotation",
			labels:      map[string]string{"agentpool": "user", "example.com/a": "1", "kubernetes.azure.com/mode": "user", "node.kubernetes.io/role": "y"},
			annotations: map[string]string{pool.ManagedLabelsAnnotation: `["example.com/a","kubernetes.azure.com/mode","node.kubernetes.io/role"]`},
			want:        Plan{Set: map[string]string{}, Annotation: `["example.com/a"]`, AnnotationChanged: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PlanNodeForGate(g, tt.labels, tt.annotations, set, false)); diff != "" {
				t.Errorf("PlanNodeForGate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	p := Plan{Set: map[string]string{"a": "1"}, Remove: []string{"b"}, Annotation: `["a"]`, AnnotationChanged: true}
	raw, err := p.MergePatch("42")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{
		"resourceVersion": "42",
		"labels":          map[string]any{"a": "1", "b": nil},
		"annotations":     map[string]any{pool.ManagedLabelsAnnotation: `["a"]`},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}

func TestLiftStartupTaint(t *testing.T) {
	startup := corev1.Taint{Key: pool.StartupTaintKey, Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "example.com/other", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name   string
		taints []corev1.Taint
		key    string
		// want is the patch's spec, "" for none.
		want string
	}{
		{name: "only the startup taint goes, the others stay in order", taints: []corev1.Taint{other, startup, other}, key: pool.StartupTaintKey,
			want: `{"taints":[{"key":"example.com/other","value":"x","effect":"NoSchedule"},{"key":"example.com/other","value":"x","effect":"NoSchedule"}]}`},
		{name: "the only taint", taints: []corev1.Taint{startup}, key: pool.StartupTaintKey, want: `{"taints":[]}`},
		{name: "not tainted: no write", taints: []corev1.Taint{other}, key: pool.StartupTaintKey},
		{name: "no key configured: nothing lifted", taints: []corev1.Taint{startup}, key: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Plan
			p.LiftStartupTaint(tt.taints, tt.key)
			if p.Empty() != (tt.want == "") {
				t.Errorf("Empty() = %v, want %v", p.Empty(), tt.want == "")
			}
			patch, err := p.MergePatch("7")
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Spec json.RawMessage `json:"spec"`
			}
			if err := json.Unmarshal(patch, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got.Spec)); diff != "" {
				t.Errorf("patch %s: spec (-want +got):\n%s", patch, diff)
			}
		})
	}
}
