package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// TestRefusedKey: the keys no NodePoolLabelSet may set, whatever its value, are the ones the
// labeler's admission policy refuses whatever a write declares managed (#34): reserved
// kubernetes.io/k8s.io keys but node-role./node-restriction., the domain labeler's, and the
// keys SystemPoolGuard's systemNodeSelector reads (configuration: only with them given).
func TestRefusedKey(t *testing.T) {
	system := []string{"kubernetes.azure.com/mode", "example.com/system"}
	tests := []struct {
		key            string
		systemNodeKeys []string
		want           string
	}{
		{key: "example.com/tier", systemNodeKeys: system},
		{key: "kubernetes.azure.com/mode", systemNodeKeys: system, want: systemNodeKeyMessage},
		{key: "kubernetes.azure.com/mode"},
		{key: "example.com/system", systemNodeKeys: system, want: systemNodeKeyMessage},
		{key: "kubernetes.azure.com/agentpool", systemNodeKeys: system},
		{key: "kubernetes.io/hostname", want: reservedKeyMessage},
		{key: "node.kubernetes.io/exclude-from-external-load-balancers", systemNodeKeys: system, want: reservedKeyMessage},
		{key: "sub.k8s.io/x", want: reservedKeyMessage},
		{key: "node-role.kubernetes.io/worker", systemNodeKeys: system},
		{key: "node-restriction.kubernetes.io/pool", systemNodeKeys: system},
		{key: "topology.pool-scheduler.io/update-domain", want: domainKeyMessage},
		{key: "topology.pool-scheduler.io/anything", systemNodeKeys: system, want: domainKeyMessage},
		// A reserved key in the selector is refused as reserved: the CRD says so too.
		{key: "node.kubernetes.io/role", systemNodeKeys: []string{"node.kubernetes.io/role"}, want: reservedKeyMessage},
	}
	for _, tt := range tests {
		if got := RefusedKey(tt.key, tt.systemNodeKeys); got != tt.want {
			t.Errorf("RefusedKey(%q, %q) = %q, want %q", tt.key, tt.systemNodeKeys, got, tt.want)
		}
	}
}

func TestSystemNodeKeys(t *testing.T) {
	tests := []struct {
		name string
		sel  *metav1.LabelSelector
		want []string
	}{
		{name: "none"},
		{name: "empty", sel: &metav1.LabelSelector{}},
		{name: "AKS", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}, want: []string{"kubernetes.azure.com/mode"}},
		{name: "labels and expressions, each once", sel: &metav1.LabelSelector{
			MatchLabels: map[string]string{"example.com/tier": "sys", "example.com/system": "true"},
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "example.com/role", Operator: metav1.LabelSelectorOpIn, Values: []string{"system"}},
				{Key: "example.com/tier", Operator: metav1.LabelSelectorOpExists},
			},
		}, want: []string{"example.com/system", "example.com/tier", "example.com/role"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, SystemNodeKeys(&config.SystemPoolGuardArgs{SystemNodeSelector: tt.sel})); diff != "" {
				t.Errorf("SystemNodeKeys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGateIgnoresRefusedKeys: a set naming a system-node or reserved key (stored past the CRD,
// or the selector's keys, which the CRD cannot know) has those labels dropped and reported; a
// node carrying the set's other labels is ready, and a refused key recorded as managed is not
// stale (the labeler may not remove it).
func TestGateIgnoresRefusedKeys(t *testing.T) {
	g := Gate{SystemNodeKeys: []string{"kubernetes.azure.com/mode"}}
	sets := g.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{labelSet("pool-scheduler", "user", map[string]labelsv1alpha1.LabelValue{
		"example.com/tier":          "gold",
		"kubernetes.azure.com/mode": "system",
		"node.kubernetes.io/role":   "x",
	})})
	p := sets.Pool("user")
	if diff := cmp.Diff([]Label{{Key: "example.com/tier", Value: "gold"}}, p.Labels); diff != "" {
		t.Errorf("desired labels (-want +got):\n%s", diff)
	}
	var got []string
	for _, l := range p.Ignored {
		got = append(got, l.Source+" "+l.Key)
	}
	if diff := cmp.Diff([]string{"pool-scheduler/user kubernetes.azure.com/mode", "pool-scheduler/user node.kubernetes.io/role"}, got); diff != "" {
		t.Errorf("ignored labels (-want +got):\n%s", diff)
	}
	if len(p.Problems) != 2 {
		t.Errorf("problems %q, want the two ignored labels", p.Problems)
	}
	for _, tt := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        Cause
	}{
		{name: "other labels applied", labels: map[string]string{"agentpool": "user", "example.com/tier": "gold"}, want: Ready},
		{name: "other labels missing", labels: map[string]string{"agentpool": "user"}, want: LabelsNotApplied},
		{name: "refused keys recorded as managed are not stale",
			labels:      map[string]string{"agentpool": "user", "example.com/tier": "gold", "kubernetes.azure.com/mode": "user", "node.kubernetes.io/role": "y"},
			annotations: map[string]string{ManagedLabelsAnnotation: `["example.com/tier","kubernetes.azure.com/mode","node.kubernetes.io/role"]`}, want: Ready},
		{name: "other managed keys still are",
			labels:      map[string]string{"agentpool": "user", "example.com/tier": "gold", "example.com/old": "1"},
			annotations: map[string]string{ManagedLabelsAnnotation: `["example.com/old","example.com/tier"]`}, want: StaleLabel},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if v := g.Check(tt.labels, tt.annotations, sets); v.Cause != tt.want {
				t.Errorf("Check = %+v, want cause %v", v, tt.want)
			}
		})
	}
	// Without the selector's keys (CompileLabelSets, as the CRD knows it) the system-node
	// label is desired: the keys come from SystemPoolGuard's args.
	plain := CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{labelSet("pool-scheduler", "user", map[string]labelsv1alpha1.LabelValue{"kubernetes.azure.com/mode": "system"})})
	if _, ok := plain.Pool("user").Desired("kubernetes.azure.com/mode"); !ok {
		t.Error("without system-node keys, kubernetes.azure.com/mode is not desired")
	}
}
