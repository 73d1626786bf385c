package pool

import (
	"math/rand"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

func TestExcludedByAffinity(t *testing.T) {
	args := &config.SystemPoolGuardArgs{
		PoolLabelKeys:      []string{"agentpool", "nodepool"},
		SystemPools:        []string{"system"},
		SystemNodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode": "system"}},
	}
	policy, err := NewSystemPolicy(args)
	if err != nil {
		t.Fatal(err)
	}
	r := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
		return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	// What admission writes: every pool key NotIn the system pools, and mode NotIn system.
	admitted := []v1.NodeSelectorRequirement{
		r("agentpool", v1.NodeSelectorOpNotIn, "system"), r("nodepool", v1.NodeSelectorOpNotIn, "system"), r("mode", v1.NodeSelectorOpNotIn, "system"),
	}
	withTerms := func(terms ...[]v1.NodeSelectorRequirement) *v1.Pod {
		p := st.MakePod().Name("p").Obj()
		var ts []v1.NodeSelectorTerm
		for _, reqs := range terms {
			ts = append(ts, v1.NodeSelectorTerm{MatchExpressions: reqs})
		}
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: ts}}}
		return p
	}
	plus := func(a []v1.NodeSelectorRequirement, more ...v1.NodeSelectorRequirement) []v1.NodeSelectorRequirement {
		return append(append([]v1.NodeSelectorRequirement{}, a...), more...)
	}
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "no affinity", pod: st.MakePod().Name("p").Obj()},
		{name: "as admitted", pod: withTerms(admitted), want: true},
		{name: "as admitted, every term of the pod's own", pod: withTerms(plus(admitted, r("disk", v1.NodeSelectorOpIn, "ssd")), plus(admitted, r("gpu", v1.NodeSelectorOpExists))), want: true},
		{name: "one term without it", pod: withTerms(admitted, []v1.NodeSelectorRequirement{r("disk", v1.NodeSelectorOpIn, "ssd")})},
		{name: "the mode requirement missing", pod: withTerms(admitted[:2])},
		{name: "a wider NotIn still avoids", pod: withTerms([]v1.NodeSelectorRequirement{
			r("agentpool", v1.NodeSelectorOpNotIn, "system", "infra"), r("nodepool", v1.NodeSelectorOpNotIn, "system"), r("mode", v1.NodeSelectorOpIn, "user")}), want: true},
		{name: "pinned to a user pool, mode unsaid", pod: withTerms([]v1.NodeSelectorRequirement{r("agentpool", v1.NodeSelectorOpIn, "user")})},
		{name: "pinned by nodeSelector with mode=user", pod: func() *v1.Pod {
			p := withTerms([]v1.NodeSelectorRequirement{r("nodepool", v1.NodeSelectorOpNotIn, "system")})
			p.Spec.NodeSelector = map[string]string{"agentpool": "user", "mode": "user"}
			return p
		}(), want: true},
		{name: "an In that includes the system pool", pod: withTerms([]v1.NodeSelectorRequirement{
			r("agentpool", v1.NodeSelectorOpIn, "user", "system"), r("nodepool", v1.NodeSelectorOpNotIn, "system"), r("mode", v1.NodeSelectorOpNotIn, "system")})},
		{name: "no terms", pod: withTerms()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.ExcludedByAffinity(tt.pod); got != tt.want {
				t.Errorf("ExcludedByAffinity = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestExcludedByAffinityIsSafe: whenever ExcludedByAffinity says a pod's affinity keeps it off
// system nodes, no node the default scheduler's NodeAffinity would accept for it is a system
// node, on random policies, pods and nodes. SystemPoolGuard skips its Filter on that word.
func TestExcludedByAffinityIsSafe(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	keys := []string{"agentpool", "nodepool", "mode", "disk"}
	values := []string{"system", "user", "infra", "ssd", ""}
	ops := []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist}
	pick := func(s []string, n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, s[rng.Intn(len(s))])
		}
		return out
	}
	randomReq := func() v1.NodeSelectorRequirement {
		op := ops[rng.Intn(len(ops))]
		req := v1.NodeSelectorRequirement{Key: keys[rng.Intn(len(keys))], Operator: op}
		if op == v1.NodeSelectorOpIn || op == v1.NodeSelectorOpNotIn {
			req.Values = pick(values[:4], 1+rng.Intn(2))
		}
		return req
	}
	excluded, checked := 0, 0
	for round := 0; round < 300; round++ {
		args := &config.SystemPoolGuardArgs{PoolLabelKeys: []string{"agentpool", "nodepool"}, SystemPools: pick(values[:3], 1+rng.Intn(2))}
		if rng.Intn(2) == 0 {
			args.SystemNodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"mode": "system"}}
		}
		policy, err := NewSystemPolicy(args)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []*v1.Node
		for i := 0; i < 40; i++ {
			l := map[string]string{}
			for _, k := range keys {
				if v := values[rng.Intn(len(values))]; v != "" {
					l[k] = v
				}
			}
			node := st.MakeNode().Name("n").Obj()
			node.Labels = l
			nodes = append(nodes, node)
		}
		for i := 0; i < 40; i++ {
			var terms [][]v1.NodeSelectorRequirement
			for n := 1 + rng.Intn(2); n > 0; n-- {
				var reqs []v1.NodeSelectorRequirement
				if rng.Intn(2) == 0 && len(policy.Avoid) > 0 {
					reqs = append(reqs, policy.Avoid[rng.Intn(len(policy.Avoid))]...)
				}
				for m := rng.Intn(4); m > 0; m-- {
					reqs = append(reqs, randomReq())
				}
				terms = append(terms, reqs)
			}
			pod := st.MakePod().Name("p").Obj()
			var ts []v1.NodeSelectorTerm
			for _, reqs := range terms {
				ts = append(ts, v1.NodeSelectorTerm{MatchExpressions: reqs})
			}
			pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: ts}}}
			if rng.Intn(3) == 0 {
				pod.Spec.NodeSelector = map[string]string{keys[rng.Intn(len(keys))]: values[rng.Intn(4)]}
			}
			if !policy.ExcludedByAffinity(pod) {
				continue
			}
			excluded++
			required := nodeaffinity.GetRequiredNodeAffinity(pod)
			for _, node := range nodes {
				checked++
				ok, err := required.Match(node)
				if err != nil {
					t.Fatalf("pod affinity %+v: %v", ts, err)
				}
				if ok && policy.ClassifyNode(node.Labels) != NotSystemNode {
					t.Fatalf("pod with nodeSelector %v and terms %+v is said to avoid system nodes, but matches system node %v (system pools %v)",
						pod.Spec.NodeSelector, ts, node.Labels, args.SystemPools)
				}
			}
		}
	}
	// The random pods must exercise the claim, not only its refusals.
	if excluded < 500 {
		t.Fatalf("only %d of the random pods were said to avoid system nodes; the test checks too little", excluded)
	}
	t.Logf("%d pods said to avoid system nodes, %d node matches checked", excluded, checked)
}
