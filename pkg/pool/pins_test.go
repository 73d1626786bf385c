package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestPinsOf(t *testing.T) {
	keys := []string{"kubernetes.azure.com/agentpool", "karpenter.sh/nodepool"}
	term := func(reqs ...v1.NodeSelectorRequirement) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	in := func(key string, values ...string) v1.NodeSelectorRequirement {
		return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
	}
	withTerms := func(terms ...v1.NodeSelectorTerm) *v1.Pod {
		p := st.MakePod().Name("p").Obj()
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
		return p
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want Pins
	}{
		{name: "none", pod: st.MakePod().Name("p").Obj()},
		{name: "nodeSelector on pool keys only", pod: st.MakePod().Name("p").NodeSelector(map[string]string{"kubernetes.azure.com/agentpool": "a", "disk": "ssd"}).Obj(),
			want: Pins{Selector: []Pin{{Key: "kubernetes.azure.com/agentpool", Values: []string{"a"}}}}},
		{name: "every term pinned: one pin per term, the fewest values", pod: withTerms(
			term(in("kubernetes.azure.com/agentpool", "a", "b"), in("karpenter.sh/nodepool", "k")),
			term(in("karpenter.sh/nodepool", "x", "y"))),
			want: Pins{Terms: []Pin{{Key: "karpenter.sh/nodepool", Values: []string{"k"}}, {Key: "karpenter.sh/nodepool", Values: []string{"x", "y"}}}}},
		{name: "a term without a pool In pins nothing", pod: withTerms(
			term(in("kubernetes.azure.com/agentpool", "a")),
			term(v1.NodeSelectorRequirement{Key: "kubernetes.azure.com/agentpool", Operator: v1.NodeSelectorOpNotIn, Values: []string{"a"}}))},
		{name: "no terms", pod: withTerms()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PinsOf(tt.pod, keys)); diff != "" {
				t.Errorf("PinsOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPinsAllow(t *testing.T) {
	pins := Pins{
		Selector: []Pin{{Key: "pool", Values: []string{"a"}}},
		Terms:    []Pin{{Key: "zone", Values: []string{"1"}}, {Key: "tier", Values: []string{"gold", "silver"}}},
	}
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{labels: map[string]string{"pool": "a", "zone": "1"}, want: true},
		{labels: map[string]string{"pool": "a", "tier": "silver"}, want: true},
		{labels: map[string]string{"pool": "a"}, want: false},
		{labels: map[string]string{"pool": "b", "zone": "1"}, want: false},
		{labels: map[string]string{"zone": "1"}, want: false},
	}
	for _, tt := range tests {
		if got := pins.Allow(tt.labels); got != tt.want {
			t.Errorf("Allow(%v) = %v, want %v", tt.labels, got, tt.want)
		}
	}
	if !(Pins{}).Allow(nil) {
		t.Error("no pins allow every node")
	}
}
