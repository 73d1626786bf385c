package pool

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

func TestCompileLabelSets(t *testing.T) {
	tests := []struct {
		name         string
		sets         []*labelsv1alpha1.NodePoolLabelSet
		wantPools    []string
		wantLabels   map[string][]Label
		wantProblems map[string]int
		// identity: the configured pool label keys (default: the default keys).
		identity       []string
		wantConflicts  map[string][]LabelConflict
		wantUnreadable []string
		// wantIdentity: pool-identity labels with the pool's own name, kept but never enforced.
		wantIdentity map[string][]Label
	}{
		{
			name:      "no sets",
			wantPools: []string{},
		},
		{
			name: "one set per pool, labels sorted",
			sets: []*labelsv1alpha1.NodePoolLabelSet{
				labelSet("a", "spot", map[string]labelsv1alpha1.LabelValue{"z.io/b": "2", "z.io/a": "1"}),
				labelSet("a", "gpu", map[string]labelsv1alpha1.LabelValue{"z.io/gpu": "yes"}),
			},
			wantPools: []string{"gpu", "spot"},
			wantLabels: map[string][]Label{
				"spot": {{"z.io/a", "1"}, {"z.io/b", "2"}},
				"gpu":  {{"z.io/gpu", "yes"}},
			},
		},
		{
			name: "same pool in two namespaces: union; a key they disagree on is a conflict, no value wins",
			sets: []*labelsv1alpha1.NodePoolLabelSet{
				labelSet("b", "spot", map[string]labelsv1alpha1.LabelValue{"z.io/team": "web", "z.io/extra": "1", "z.io/same": "x"}),
				labelSet("a", "spot", map[string]labelsv1alpha1.LabelValue{"z.io/team": "data", "z.io/same": "x"}),
			},
			wantPools:     []string{"spot"},
			wantLabels:    map[string][]Label{"spot": {{"z.io/extra", "1"}, {"z.io/same", "x"}}},
			wantProblems:  map[string]int{"spot": 1},
			wantConflicts: map[string][]LabelConflict{"spot": {{Key: "z.io/team", Values: []string{"data", "web"}, Sources: []string{"a/spot", "b/spot"}, Message: `label "z.io/team" has conflicting values: "data" in a/spot; "web" in b/spot; none is applied until they agree`}}},
		},
		{
			// Stored before the CRD refused them: the domain labeler's keys are dropped and
			// reported, never desired (the controller and the domain labeler would rewrite each
			// other's value forever).
			name: "the domain labeler's keys are dropped and reported",
			sets: []*labelsv1alpha1.NodePoolLabelSet{
				labelSet("a", "spot", map[string]labelsv1alpha1.LabelValue{
					"z.io/a": "1", "topology.pool-scheduler.io/update-domain": "9", "topology.pool-scheduler.io/fault-domain": "1",
					"x.topology.pool-scheduler.io/y": "1",
				}),
			},
			wantPools:    []string{"spot"},
			wantLabels:   map[string][]Label{"spot": {{"x.topology.pool-scheduler.io/y", "1"}, {"z.io/a", "1"}}},
			wantProblems: map[string]int{"spot": 2},
		},
		{
			name: "pool-identity keys: only the set's own name",
			sets: []*labelsv1alpha1.NodePoolLabelSet{
				labelSet("a", "spot", map[string]labelsv1alpha1.LabelValue{
					"nodepool.banzaicloud.io/name":   "spot",
					"kubernetes.azure.com/agentpool": "gpu",
					"agentpool":                      "other",
					"example.com/pool":               "gpu",
					"z.io/ok":                        "1",
				}),
			},
			identity:     []string{"example.com/pool", "nodepool.banzaicloud.io/name"},
			wantPools:    []string{"spot"},
			wantLabels:   map[string][]Label{"spot": {{"z.io/ok", "1"}}},
			wantIdentity: map[string][]Label{"spot": {{"nodepool.banzaicloud.io/name", "spot"}}},
			wantProblems: map[string]int{"spot": 3},
		},
		{
			name: "an unreadable set marks its pool, the readable set still counts",
			sets: []*labelsv1alpha1.NodePoolLabelSet{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "spot"}, Spec: labelsv1alpha1.NodePoolLabelSetSpec{DecodeError: "json: cannot unmarshal"}},
				labelSet("b", "spot", map[string]labelsv1alpha1.LabelValue{"z.io/ok": "1"}),
			},
			wantPools:      []string{"spot"},
			wantLabels:     map[string][]Label{"spot": {{"z.io/ok", "1"}}},
			wantProblems:   map[string]int{"spot": 1},
			wantUnreadable: []string{"spot"},
		},
		{
			name: "invalid and reserved entries are dropped, not fatal",
			sets: []*labelsv1alpha1.NodePoolLabelSet{
				labelSet("a", "spot", map[string]labelsv1alpha1.LabelValue{
					"bad key":                             "1",
					"kubernetes.io/arch":                  "arm64",
					"z.io/bad-value":                      "not valid!",
					"z.io/ok":                             "1",
					"node-restriction.kubernetes.io/pool": "spot",
				}),
			},
			wantPools:    []string{"spot"},
			wantLabels:   map[string][]Label{"spot": {{"node-restriction.kubernetes.io/pool", "spot"}, {"z.io/ok", "1"}}},
			wantProblems: map[string]int{"spot": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CompileLabelSetsFor(NewIdentity(tt.identity), tt.sets)
			if got.Len() != len(tt.sets) {
				t.Errorf("Len() = %d, want %d", got.Len(), len(tt.sets))
			}
			if diff := cmp.Diff(tt.wantPools, got.Pools()); diff != "" {
				t.Errorf("Pools (-want +got):\n%s", diff)
			}
			for pool, want := range tt.wantLabels {
				if diff := cmp.Diff(want, got.Pool(pool).Labels); diff != "" {
					t.Errorf("pool %s labels (-want +got):\n%s", pool, diff)
				}
				if n := len(got.Pool(pool).Problems); n != tt.wantProblems[pool] {
					t.Errorf("pool %s: %d problems, want %d: %q", pool, n, tt.wantProblems[pool], got.Pool(pool).Problems)
				}
				if diff := cmp.Diff(tt.wantIdentity[pool], got.Pool(pool).IdentityLabels); diff != "" {
					t.Errorf("pool %s identity labels (-want +got):\n%s", pool, diff)
				}
				if diff := cmp.Diff(tt.wantConflicts[pool], got.Pool(pool).Conflicts); diff != "" {
					t.Errorf("pool %s conflicts (-want +got):\n%s", pool, diff)
				}
				if want := slices.Contains(tt.wantUnreadable, pool); got.Pool(pool).Unreadable != want {
					t.Errorf("pool %s: Unreadable = %v, want %v", pool, got.Pool(pool).Unreadable, want)
				}
			}
		})
	}
}

func TestIsReservedKey(t *testing.T) {
	tests := map[string]bool{
		"kubernetes.io/arch":                  true,
		"k8s.io/foo":                          true,
		"node.kubernetes.io/instance-type":    true,
		"topology.kubernetes.io/zone":         true,
		"sub.k8s.io/x":                        true,
		"node-role.kubernetes.io/worker":      false,
		"node-restriction.kubernetes.io/pool": false,
		"example.com/kubernetes.io":           false,
		"kubernetes.io.example.com/x":         false,
		"notkubernetes.io/x":                  false,
		"mykubernetes.io/x":                   false,
		"kubernetes.io":                       false,
		"example.com/a":                       false,
		// AKS's domain and the control-plane roles: cloud-provider-azure excludes such nodes
		// from its load balancers.
		"kubernetes.azure.com/managed":          true,
		"kubernetes.azure.com/resource-group":   true,
		"kubernetes.azure.com/agentpool":        false,
		"node-role.kubernetes.io/control-plane": true,
		"node-role.kubernetes.io/master":        true,
	}
	for key, want := range tests {
		if got := IsReservedKey(key); got != want {
			t.Errorf("IsReservedKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestWithLabelledPools(t *testing.T) {
	sets := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{
		labelSet("pool-scheduler", "spot", map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}),
	})
	got := sets.WithLabelledPools([]string{"spot", "pool1", "pool2"})
	if diff := cmp.Diff([]string{"pool1", "pool2"}, got.NotVisible()); diff != "" {
		t.Errorf("NotVisible (-want +got):\n%s", diff)
	}
	if sets.NotVisible() != nil {
		t.Errorf("WithLabelledPools changed its receiver: %q", sets.NotVisible())
	}
	if got.Pool("spot") != sets.Pool("spot") || got.Len() != sets.Len() {
		t.Error("WithLabelledPools does not keep the compiled sets")
	}
	nodes := []map[string]string{
		{poolKey: "a", ManagedLabelsAnnotation: `["x"]`},
		{poolKey: "b", ManagedLabelsAnnotation: `[]`},
		{ManagedLabelsAnnotation: `["x"]`},
		{poolKey: "c"},
		{poolKey: "a", ManagedLabelsAnnotation: `["y"]`},
	}
	// One map holds both for brevity: the pool label is a label, the annotation an annotation.
	pools := LabelledPools(Identity{}, nodes, func(m map[string]string) (map[string]string, map[string]string) { return m, m })
	if diff := cmp.Diff([]string{"a"}, pools); diff != "" {
		t.Errorf("LabelledPools (-want +got):\n%s", diff)
	}
}
