package admission

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

func req(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestAvoidSystemNodes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		guard config.SystemPoolGuardArgs
		want  [][]v1.NodeSelectorRequirement
	}{
		{name: "nothing marks system nodes", guard: config.SystemPoolGuardArgs{PoolLabelKeys: []string{"pool"}}},
		{
			name:  "pool names on every key",
			guard: config.SystemPoolGuardArgs{PoolLabelKeys: []string{"a", "b"}, SystemPools: []string{"sys", "infra", "sys"}},
			want:  [][]v1.NodeSelectorRequirement{{req("a", v1.NodeSelectorOpNotIn, "infra", "sys"), req("b", v1.NodeSelectorOpNotIn, "infra", "sys")}},
		},
		{
			name: "pools and a one-label selector",
			guard: config.SystemPoolGuardArgs{PoolLabelKeys: []string{"a"}, SystemPools: []string{"sys"},
				SystemNodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode": "system"}}},
			want: [][]v1.NodeSelectorRequirement{{req("a", v1.NodeSelectorOpNotIn, "sys"), req("mode", v1.NodeSelectorOpNotIn, "system")}},
		},
		{
			name: "a selector of several requirements: one alternative each",
			guard: config.SystemPoolGuardArgs{PoolLabelKeys: []string{"a"}, SystemNodeSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"mode": "system"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"infra"}},
					{Key: "x", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"y"}},
					{Key: "e", Operator: metav1.LabelSelectorOpExists},
					{Key: "d", Operator: metav1.LabelSelectorOpDoesNotExist},
				}}},
			want: [][]v1.NodeSelectorRequirement{
				{req("mode", v1.NodeSelectorOpNotIn, "system")},
				{req("tier", v1.NodeSelectorOpNotIn, "infra")},
				{req("x", v1.NodeSelectorOpIn, "y")},
				{req("e", v1.NodeSelectorOpDoesNotExist)},
				{req("d", v1.NodeSelectorOpExists)},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pool.AvoidSystemNodes(&tt.guard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// The alternatives match a node exactly when the guard does not call it a system
			// node (pool keys agreeing).
			policy, err := pool.NewSystemPolicy(&tt.guard)
			if err != nil {
				t.Fatal(err)
			}
			for _, nodeLabels := range []map[string]string{
				{}, {"a": "sys"}, {"a": "user"}, {"b": "infra"}, {"mode": "system"}, {"mode": "user", "a": "user"},
				{"tier": "infra"}, {"x": "y"}, {"x": "z"}, {"e": ""}, {"d": ""}, {"mode": "system", "tier": "infra", "x": "y", "e": "1"},
			} {
				node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: nodeLabels}}
				matches := got == nil || matchesAny(t, node, got)
				if system := policy.ClassifyNode(nodeLabels) != pool.NotSystemNode; matches == system {
					t.Errorf("node %v: system %v, affinity matches %v", nodeLabels, system, matches)
				}
			}
		})
	}
}

// matchesAny evaluates the alternatives as kube-scheduler's NodeAffinity does.
func matchesAny(t *testing.T, node *v1.Node, alts [][]v1.NodeSelectorRequirement) bool {
	ns := &v1.NodeSelector{}
	for _, a := range alts {
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, v1.NodeSelectorTerm{MatchExpressions: a})
	}
	sel, err := nodeaffinity.NewNodeSelector(ns)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Match(node)
}

func TestMutate(t *testing.T) {
	guard := &config.SystemPoolGuardArgs{
		PoolLabelKeys: []string{"pool"}, SystemPools: []string{"system"},
		SystemNodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode": "system", "role": "infra"}},
		SystemNamespaces:   []string{"kube-system"}, SystemTolerationKeys: []string{"CriticalAddonsOnly"},
	}
	m, err := NewMutator("pool-scheduler", guard, true)
	if err != nil {
		t.Fatal(err)
	}
	alt1 := []v1.NodeSelectorRequirement{req("pool", v1.NodeSelectorOpNotIn, "system"), req("mode", v1.NodeSelectorOpNotIn, "system")}
	alt2 := []v1.NodeSelectorRequirement{req("pool", v1.NodeSelectorOpNotIn, "system"), req("role", v1.NodeSelectorOpNotIn, "infra")}
	ssd := req("disk", v1.NodeSelectorOpIn, "ssd")
	terms := func(ts ...[]v1.NodeSelectorRequirement) *v1.Affinity {
		ns := &v1.NodeSelector{}
		for _, e := range ts {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, v1.NodeSelectorTerm{MatchExpressions: e})
		}
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
	}
	cat := func(a ...[]v1.NodeSelectorRequirement) []v1.NodeSelectorRequirement {
		var out []v1.NodeSelectorRequirement
		for _, x := range a {
			out = append(out, x...)
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		pod      *v1.Pod
		want     Result
		wantName string
		wantAff  *v1.Affinity
	}{
		{name: "no affinity: one term per alternative", pod: st.MakePod().Namespace("a").Obj(),
			want: Result{SchedulerName: true, NodeAffinity: true}, wantName: "pool-scheduler", wantAff: terms(alt1, alt2)},
		{name: "each term times each alternative", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: v1.PodSpec{SchedulerName: "default-scheduler", Affinity: terms([]v1.NodeSelectorRequirement{ssd})}},
			want: Result{SchedulerName: true, NodeAffinity: true}, wantName: "pool-scheduler", wantAff: terms(cat([]v1.NodeSelectorRequirement{ssd}, alt1), cat([]v1.NodeSelectorRequirement{ssd}, alt2))},
		{name: "already mutated: unchanged", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: v1.PodSpec{SchedulerName: "pool-scheduler", Affinity: terms(alt1, alt2)}},
			wantName: "pool-scheduler", wantAff: terms(alt1, alt2)},
		{name: "system namespace: name only", pod: st.MakePod().Namespace("kube-system").Obj(),
			want: Result{SchedulerName: true}, wantName: "pool-scheduler"},
		{name: "system toleration: name only", pod: st.MakePod().Namespace("a").Toleration("CriticalAddonsOnly").Obj(),
			want: Result{SchedulerName: true}, wantName: "pool-scheduler"},
		{name: "another scheduler", pod: st.MakePod().Namespace("a").SchedulerName("volcano").Obj(), wantName: "volcano"},
		{name: "bound", pod: st.MakePod().Namespace("a").Node("n").Obj()},
		// A DaemonSet's pods stay with the default scheduler, without the affinity.
		{name: "DaemonSet pod", pod: st.MakePod().Namespace("a").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()},
		// Owned by a DaemonSet without controlling it (or by another kind): not a node agent.
		{name: "DaemonSet reference without controller", pod: func() *v1.Pod {
			p := st.MakePod().Namespace("a").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()
			p.OwnerReferences[0].Controller = nil
			return p
		}(), want: Result{SchedulerName: true, NodeAffinity: true}, wantName: "pool-scheduler", wantAff: terms(alt1, alt2)},
		{name: "ReplicaSet pod", pod: st.MakePod().Namespace("a").OwnerReference("web", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj(),
			want: Result{SchedulerName: true, NodeAffinity: true}, wantName: "pool-scheduler", wantAff: terms(alt1, alt2)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod.DeepCopy()
			if got := m.Mutate(pod); got != tt.want {
				t.Errorf("result %+v, want %+v", got, tt.want)
			}
			if pod.Spec.SchedulerName != tt.wantName {
				t.Errorf("schedulerName %q, want %q", pod.Spec.SchedulerName, tt.wantName)
			}
			// Handed over: marked, so the hand-off controller may hand it back; else never.
			if got, want := pod.Annotations[profile.HandedOverAnnotation], map[bool]string{true: "pool-scheduler"}[tt.want.SchedulerName]; got != want {
				t.Errorf("annotation %s = %q, want %q", profile.HandedOverAnnotation, got, want)
			}
			if diff := cmp.Diff(tt.wantAff, pod.Spec.Affinity); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderPolicyRefusesSeveralAlternatives(t *testing.T) {
	guard := &config.SystemPoolGuardArgs{SystemNodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode": "system", "role": "infra"}}}
	_, _, err := RenderPolicy(PolicyOptions{Name: "p", SchedulerName: "s", Guard: guard})
	if err == nil || !strings.Contains(err.Error(), "systemNodeSelector") {
		t.Errorf("error %v, want one naming systemNodeSelector", err)
	}
}
