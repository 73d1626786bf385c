package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

func labelSet(namespace, name string, labels map[string]labelsv1alpha1.LabelValue) *labelsv1alpha1.NodePoolLabelSet {
	return &labelsv1alpha1.NodePoolLabelSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       labelsv1alpha1.NodePoolLabelSetSpec{Labels: labels},
	}
}

const poolKey = "nodepool.banzaicloud.io/name"

func TestGateCheck(t *testing.T) {
	spot := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
		labelSet("ns", "spot", map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "spot", "example.com/team": "data"}),
	})
	readySpot := map[string]string{poolKey: "spot", "example.com/lifecycle": "spot", "example.com/team": "data"}
	dup := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
		labelSet("a", "dup", map[string]labelsv1alpha1.LabelValue{"example.com/a": "1", "example.com/shared": "a"}),
		labelSet("b", "dup", map[string]labelsv1alpha1.LabelValue{"example.com/shared": "b"}),
	})
	broken := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "broken"}, Spec: labelsv1alpha1.NodePoolLabelSetSpec{DecodeError: "json: cannot unmarshal number"}},
	})
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	managed := func(v string) map[string]string { return map[string]string{ManagedLabelsAnnotation: v} }

	tests := []struct {
		name        string
		gate        Gate
		labels      map[string]string
		annotations map[string]string
		sets        *LabelSets
		want        Verdict
	}{
		{
			name:   "all desired labels present",
			labels: readySpot, sets: spot,
			want: Verdict{Cause: Ready, Pool: "spot"},
		},
		{
			name:   "only the pool label: labels not applied, first missing key reported",
			labels: map[string]string{poolKey: "spot"}, sets: spot,
			want: Verdict{Cause: LabelsNotApplied, Pool: "spot", Key: "example.com/lifecycle", Want: "spot", Missing: true},
		},
		{
			name:   "wrong value",
			labels: with(readySpot, "example.com/team", "web"), sets: spot,
			want: Verdict{Cause: LabelsNotApplied, Pool: "spot", Key: "example.com/team", Want: "data", Got: "web"},
		},
		{
			name:   "pool without a NodePoolLabelSet is ready",
			labels: map[string]string{poolKey: "general"}, sets: spot,
			want: Verdict{Cause: Ready, Pool: "general"},
		},
		{
			name:   "Auto: unknown pool rejected once a set exists",
			labels: map[string]string{}, sets: spot,
			want: Verdict{Cause: UnknownPool},
		},
		{
			name:   "Auto: unknown pool allowed while no set exists",
			labels: map[string]string{}, sets: EmptyLabelSets,
			want: Verdict{Cause: Ready},
		},
		{
			name:   "Auto: nil sets count as none",
			labels: map[string]string{}, sets: nil,
			want: Verdict{Cause: Ready},
		},
		{
			name: "Reject: unknown pool rejected with no sets",
			gate: Gate{UnknownPoolPolicy: config.UnknownPoolReject}, labels: map[string]string{}, sets: EmptyLabelSets,
			want: Verdict{Cause: UnknownPool},
		},
		{
			name: "Allow: unknown pool allowed with sets",
			gate: Gate{UnknownPoolPolicy: config.UnknownPoolAllow}, labels: map[string]string{}, sets: spot,
			want: Verdict{Cause: Ready},
		},
		{
			name:   "stale managed label still on the node",
			labels: with(readySpot, "example.com/old", "x"), sets: spot,
			annotations: managed(`["example.com/lifecycle","example.com/team","example.com/old"]`),
			want:        Verdict{Cause: StaleLabel, Pool: "spot", Key: "example.com/old", Got: "x"},
		},
		{
			// Recorded by a set stored before the CRD refused domain keys: the domain labeler's
			// label, not stale (the controller may not remove it).
			name:   "a managed domain key is not stale",
			labels: with(readySpot, "topology.pool-scheduler.io/update-domain", "3"), sets: spot,
			annotations: managed(`["example.com/lifecycle","example.com/team","topology.pool-scheduler.io/update-domain"]`),
			want:        Verdict{Cause: Ready, Pool: "spot"},
		},
		{
			name:   "annotation in the labeler's own format",
			labels: readySpot, sets: spot,
			annotations: managed(`["example.com/lifecycle","example.com/team"]`),
			want:        Verdict{Cause: Ready, Pool: "spot"},
		},
		{
			name:   "managed label already removed is not stale",
			labels: readySpot, sets: spot,
			annotations: managed(`["example.com/lifecycle","example.com/old"]`),
			want:        Verdict{Cause: Ready, Pool: "spot"},
		},
		{
			// The set may live where the gate does not read (the nodepool-labels-operator's
			// namespace): stale means a label a set in view stopped wanting.
			name:   "managed labels of a pool with no set in view are not stale",
			labels: with(map[string]string{poolKey: "gone"}, "example.com/gpu", "a100"), sets: spot,
			annotations: managed(`["example.com/gpu"]`),
			want:        Verdict{Cause: Ready, Pool: "gone"},
		},
		{
			// A set in view that was deleted did stop wanting its labels.
			name:   "pool whose set was deleted in view: its managed labels are stale",
			labels: with(map[string]string{poolKey: "gone"}, "example.com/gpu", "a100"), sets: spot.WithLabelledPools([]string{"gone"}).WithDeletedPools([]string{"gone"}),
			annotations: managed(`["example.com/gpu"]`),
			want:        Verdict{Cause: StaleLabel, Pool: "gone", Key: "example.com/gpu", Got: "a100"},
		},
		{
			name:   "pool whose set was deleted in view: a new node is not held",
			labels: map[string]string{poolKey: "gone"}, sets: spot.WithLabelledPools([]string{"gone"}).WithDeletedPools([]string{"gone"}),
			want: Verdict{Cause: Ready, Pool: "gone"},
		},
		{
			name:   "malformed annotation of a pool with no set in view holds nothing",
			labels: map[string]string{poolKey: "gone"}, sets: spot,
			annotations: managed(`not json`),
			want:        Verdict{Cause: Ready, Pool: "gone"},
		},
		{
			name:   "pool labelled from a set not in view: an unlabelled node is held",
			labels: map[string]string{poolKey: "pool1"}, sets: spot.WithLabelledPools([]string{"pool1"}),
			want: Verdict{Cause: LabelSetNotVisible, Pool: "pool1"},
		},
		{
			name:   "pool labelled from a set not in view: the operator's empty annotation is not a label",
			labels: map[string]string{poolKey: "pool1"}, sets: spot.WithLabelledPools([]string{"pool1"}),
			annotations: managed(`[]`),
			want:        Verdict{Cause: LabelSetNotVisible, Pool: "pool1"},
		},
		{
			name:   "pool labelled from a set not in view: a labelled node is used, its labels not judged stale",
			labels: map[string]string{poolKey: "pool1", "example.com/gpu": "a100"}, sets: spot.WithLabelledPools([]string{"pool1"}),
			annotations: managed(`["example.com/gpu"]`),
			want:        Verdict{Cause: Ready, Pool: "pool1"},
		},
		{
			name:   "labelled pool with a set in view is judged by the set",
			labels: with(map[string]string{poolKey: "spot"}), sets: spot.WithLabelledPools([]string{"spot"}),
			want: Verdict{Cause: LabelsNotApplied, Pool: "spot", Key: "example.com/lifecycle", Want: "spot", Missing: true},
		},
		{
			name: "labelled pools do not make a node without a pool known",
			gate: Gate{UnknownPoolPolicy: config.UnknownPoolAllow}, labels: map[string]string{}, sets: EmptyLabelSets.WithLabelledPools([]string{"pool1"}),
			want: Verdict{Cause: Ready},
		},
		{
			name:   "malformed annotation",
			labels: readySpot, sets: spot,
			annotations: managed(`not json`),
			want:        Verdict{Cause: MalformedAnnotation, Pool: "spot", Got: "not json"},
		},
		{
			name:   "missing desired label is reported before a malformed annotation",
			labels: map[string]string{poolKey: "spot"}, sets: spot,
			annotations: managed(`not json`),
			want:        Verdict{Cause: LabelsNotApplied, Pool: "spot", Key: "example.com/lifecycle", Want: "spot", Missing: true},
		},
		{
			name:   "required label key missing",
			gate:   Gate{RequiredLabelKeys: []string{"topology.pool-scheduler.io/update-domain"}},
			labels: readySpot, sets: spot,
			want: Verdict{Cause: MissingRequiredLabel, Pool: "spot", Key: "topology.pool-scheduler.io/update-domain"},
		},
		{
			name:   "required label key with an empty value is present",
			gate:   Gate{RequiredLabelKeys: []string{"example.com/flag"}},
			labels: with(readySpot, "example.com/flag", ""), sets: spot,
			want: Verdict{Cause: Ready, Pool: "spot"},
		},
		{
			name:   "per-pool required key applies to its pool",
			gate:   Gate{PoolRequiredLabelKeys: map[string][]string{"spot": {"nvidia.com/gpu.product"}}},
			labels: readySpot, sets: spot,
			want: Verdict{Cause: MissingRequiredLabel, Pool: "spot", Key: "nvidia.com/gpu.product"},
		},
		{
			name:   "per-pool required key does not apply to other pools",
			gate:   Gate{PoolRequiredLabelKeys: map[string][]string{"gpu": {"nvidia.com/gpu.product"}}},
			labels: readySpot, sets: spot,
			want: Verdict{Cause: Ready, Pool: "spot"},
		},
		{
			name:   "required keys apply to nodes without a pool when allowed",
			gate:   Gate{UnknownPoolPolicy: config.UnknownPoolAllow, RequiredLabelKeys: []string{"example.com/zone"}},
			labels: map[string]string{}, sets: spot,
			want: Verdict{Cause: MissingRequiredLabel, Key: "example.com/zone"},
		},
		{
			name:   "sets that disagree: a node without the key is held",
			labels: map[string]string{poolKey: "dup", "example.com/a": "1"}, sets: dup,
			want: Verdict{Cause: LabelSetConflict, Pool: "dup", Key: "example.com/shared", Want: "a|b", Missing: true},
		},
		{
			name:   "sets that disagree: a node with another value is held",
			labels: map[string]string{poolKey: "dup", "example.com/a": "1", "example.com/shared": "c"}, sets: dup,
			want: Verdict{Cause: LabelSetConflict, Pool: "dup", Key: "example.com/shared", Want: "a|b", Got: "c"},
		},
		{
			name:   "sets that disagree: a node with either value is ready, the managed key is not stale",
			labels: map[string]string{poolKey: "dup", "example.com/a": "1", "example.com/shared": "b"}, sets: dup,
			annotations: managed(`["example.com/a","example.com/shared"]`),
			want:        Verdict{Cause: Ready, Pool: "dup"},
		},
		{
			// One rule for every node of a pool whose only set cannot be read: a node the labeler
			// labelled before (its managed keys still on it) is ready, as a new node is.
			name:   "unreadable set: a pre-labelled node is ready",
			labels: map[string]string{poolKey: "broken", "example.com/old": "x"}, sets: broken,
			annotations: managed(`["example.com/old"]`),
			want:        Verdict{Cause: Ready, Pool: "broken"},
		},
		{
			name:   "unreadable set: a new node is ready",
			labels: map[string]string{poolKey: "broken"}, sets: broken,
			want: Verdict{Cause: Ready, Pool: "broken"},
		},
		{
			name:   "a managed pool-identity label is never stale",
			labels: map[string]string{"cloud.google.com/gke-nodepool": "gone", poolKey: "gone"}, sets: spot,
			annotations: managed(`["nodepool.banzaicloud.io/name"]`),
			want:        Verdict{Cause: Ready, Pool: "gone"},
		},
		{
			name:   "custom pool keys",
			gate:   Gate{Identity: NewIdentity([]string{"example.com/pool"})},
			labels: map[string]string{"example.com/pool": "spot"}, sets: spot,
			want: Verdict{Cause: LabelsNotApplied, Pool: "spot", Key: "example.com/lifecycle", Want: "spot", Missing: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.gate.Check(tt.labels, tt.annotations, tt.sets)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCauseMessagesAreFixedAndDistinct(t *testing.T) {
	seen := map[string]Cause{}
	for _, c := range Causes {
		msg := c.String()
		if msg == "" || msg == Ready.String() || msg == "unknown cause" {
			t.Errorf("cause %d has no message of its own: %q", c, msg)
		}
		if prev, dup := seen[msg]; dup {
			t.Errorf("causes %d and %d share the message %q", prev, c, msg)
		}
		seen[msg] = c
	}
}

// TestGateCheckDoesNotAllocate: Check allocates only to read a managed-labels annotation that is
// not the pool's in-sync one.
func TestGateCheckDoesNotAllocate(t *testing.T) {
	sets := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
		labelSet("ns", "spot", map[string]labelsv1alpha1.LabelValue{"example.com/lifecycle": "spot"}),
	})
	gate := Gate{RequiredLabelKeys: []string{"example.com/zone"}}
	ready := map[string]string{poolKey: "spot", "example.com/lifecycle": "spot", "example.com/zone": "1"}
	notApplied := map[string]string{poolKey: "spot", "example.com/zone": "1"}
	noZone := map[string]string{poolKey: "spot", "example.com/lifecycle": "spot"}
	inSync := map[string]string{ManagedLabelsAnnotation: `["example.com/lifecycle"]`}
	for name, labels := range map[string]map[string]string{"ready": ready, "labels not applied": notApplied, "missing required label": noZone} {
		if n := testing.AllocsPerRun(100, func() { gate.Check(labels, inSync, sets) }); n != 0 {
			t.Errorf("%s: Check allocates %v times per call", name, n)
		}
	}
	// A pool labelled from a set not in view: the annotation is looked at, not parsed.
	elsewhere := sets.WithLabelledPools([]string{"pool1"})
	pool1 := map[string]string{poolKey: "pool1", "example.com/zone": "1"}
	for name, annotations := range map[string]map[string]string{"labelled": inSync, "not labelled": nil} {
		if n := testing.AllocsPerRun(100, func() { gate.Check(pool1, annotations, elsewhere) }); n != 0 {
			t.Errorf("pool labelled elsewhere, %s node: Check allocates %v times per call", name, n)
		}
	}
}

// TestGateCheckBanzaiFieldReport uses the CR and node from the Banzai operator's announcement:
// a node labelled by that operator (its annotation, its key order) is ready.
func TestGateCheckBanzaiFieldReport(t *testing.T) {
	sets := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{labelSet("pipeline-system", "pool1", map[string]labelsv1alpha1.LabelValue{
		"node.banzaicloud.io/NetworkPerfCategory": "low",
		"node.banzaicloud.io/cpu":                 "1",
		"node.banzaicloud.io/memory":              "3.75",
		"node.banzaicloud.io/ondemand":            "false",
		"nodepool.banzaicloud.io/name":            "pool1",
	})})
	labels := map[string]string{
		"beta.kubernetes.io/arch":                 "amd64",
		"cloud.google.com/gke-nodepool":           "pool1",
		"kubernetes.io/hostname":                  "gke-stoadergt73-pool1-aeadb72d-mlg7",
		"node.banzaicloud.io/NetworkPerfCategory": "low",
		"node.banzaicloud.io/cpu":                 "1",
		"node.banzaicloud.io/memory":              "3.75",
		"node.banzaicloud.io/ondemand":            "false",
		"nodepool.banzaicloud.io/name":            "pool1",
	}
	annotations := map[string]string{ManagedLabelsAnnotation: `["node.banzaicloud.io/cpu","node.banzaicloud.io/memory","node.banzaicloud.io/ondemand","nodepool.banzaicloud.io/name","node.banzaicloud.io/NetworkPerfCategory"]`}
	if got := (&Gate{}).Check(labels, annotations, sets); !got.Ready() || got.Pool != "pool1" {
		t.Errorf("Banzai-labelled node: %+v, want ready in pool1", got)
	}
	// The same node just joined: only the GKE pool label, so it is in pool1 but not ready.
	joined := map[string]string{"cloud.google.com/gke-nodepool": "pool1", "kubernetes.io/hostname": "n"}
	if got := (&Gate{}).Check(joined, nil, sets); got.Cause != LabelsNotApplied || got.Pool != "pool1" {
		t.Errorf("freshly joined node: %+v, want labels not applied in pool1", got)
	}
}
