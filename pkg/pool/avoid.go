package pool

import (
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

// AvoidSystemNodes negates SystemPoolGuard's node classification into node-selector terms: a
// node matches one of the returned alternatives exactly when the guard does not call it a
// system node, with one exception on the side of caution: a node whose pool keys disagree
// (the first present key names a user pool, a later one a system pool) matches none.
// kube-scheduler's NodeAffinity (and every autoscaler's simulation of it) can then refuse
// system nodes without pool-scheduler. NotIn matches nodes without the key, as the guard does.
func AvoidSystemNodes(guard *config.SystemPoolGuardArgs) ([][]v1.NodeSelectorRequirement, error) {
	var common []v1.NodeSelectorRequirement
	if pools := sets.List(sets.New(guard.SystemPools...)); len(pools) > 0 {
		for _, k := range guard.PoolLabelKeys {
			common = append(common, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpNotIn, Values: pools})
		}
	}
	negated, err := negateSelector(guard.SystemNodeSelector)
	if err != nil {
		return nil, fmt.Errorf("systemNodeSelector: %w", err)
	}
	if len(negated) == 0 {
		if common == nil {
			return nil, nil
		}
		return [][]v1.NodeSelectorRequirement{common}, nil
	}
	// not(r1 and r2 ...) = not r1 or not r2 ...: one alternative per requirement.
	alts := make([][]v1.NodeSelectorRequirement, 0, len(negated))
	for _, n := range negated {
		alts = append(alts, append(slices.Clone(common), n))
	}
	return alts, nil
}

// negateSelector returns, per requirement of s, the node-selector requirement that matches
// exactly the nodes the requirement does not.
func negateSelector(s *metav1.LabelSelector) ([]v1.NodeSelectorRequirement, error) {
	if s == nil {
		return nil, nil
	}
	var out []v1.NodeSelectorRequirement
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpNotIn, Values: []string{s.MatchLabels[k]}})
	}
	for i, e := range s.MatchExpressions {
		var op v1.NodeSelectorOperator
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			op = v1.NodeSelectorOpNotIn
		case metav1.LabelSelectorOpNotIn:
			op = v1.NodeSelectorOpIn
		case metav1.LabelSelectorOpExists:
			op = v1.NodeSelectorOpDoesNotExist
		case metav1.LabelSelectorOpDoesNotExist:
			op = v1.NodeSelectorOpExists
		default:
			return nil, fmt.Errorf("matchExpressions[%d].operator: %q is not In, NotIn, Exists or DoesNotExist", i, e.Operator)
		}
		// Sorted and unique, as the policy's CEL and the chart write them.
		var values []string
		if len(e.Values) > 0 {
			values = sets.List(sets.New(e.Values...))
		}
		out = append(out, v1.NodeSelectorRequirement{Key: e.Key, Operator: op, Values: values})
	}
	return out, nil
}

// ExcludedByAffinity reports whether the pod's required node affinity (with its nodeSelector)
// already keeps it off every system node: each required term holds, among its requirements and
// the nodeSelector's, requirements that imply every requirement of one of p.Avoid's
// alternatives. Admission writes exactly such terms into the user pods it hands to
// pool-scheduler (each term ANDed with an alternative), so NodeAffinity's Filter refuses the
// system nodes for these pods and SystemPoolGuard's would only repeat it. Conservative: false
// unless the implication is plain (same key; NotIn of a superset, In of a subset or In of values
// disjoint from a NotIn, the same Exists or DoesNotExist). No allocation.
func (p *SystemPolicy) ExcludedByAffinity(pod *v1.Pod) bool {
	if len(p.Avoid) == 0 || pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return false
	}
	required := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return false
	}
	for i := range required.NodeSelectorTerms {
		term := &required.NodeSelectorTerms[i]
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			// An empty term matches no node.
			continue
		}
		if !p.termAvoids(term.MatchExpressions, pod.Spec.NodeSelector) {
			return false
		}
	}
	return true
}

// termAvoids: the requirements (and the nodeSelector) imply every requirement of one alternative.
func (p *SystemPolicy) termAvoids(reqs []v1.NodeSelectorRequirement, nodeSelector map[string]string) bool {
	for _, alt := range p.Avoid {
		all := true
		for i := range alt {
			if !impliedBy(&alt[i], reqs, nodeSelector) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func impliedBy(want *v1.NodeSelectorRequirement, reqs []v1.NodeSelectorRequirement, nodeSelector map[string]string) bool {
	if v, ok := nodeSelector[want.Key]; ok {
		// key=v is "key In [v]".
		switch want.Operator {
		case v1.NodeSelectorOpNotIn:
			if !slices.Contains(want.Values, v) {
				return true
			}
		case v1.NodeSelectorOpIn:
			if slices.Contains(want.Values, v) {
				return true
			}
		case v1.NodeSelectorOpExists:
			return true
		}
	}
	for i := range reqs {
		r := &reqs[i]
		if r.Key != want.Key {
			continue
		}
		switch {
		case r.Operator == want.Operator && (r.Operator == v1.NodeSelectorOpExists || r.Operator == v1.NodeSelectorOpDoesNotExist):
			return true
		case r.Operator == v1.NodeSelectorOpNotIn && want.Operator == v1.NodeSelectorOpNotIn && containsAll(r.Values, want.Values):
			return true
		case r.Operator == v1.NodeSelectorOpIn && want.Operator == v1.NodeSelectorOpIn && containsAll(want.Values, r.Values):
			return true
		case r.Operator == v1.NodeSelectorOpIn && want.Operator == v1.NodeSelectorOpNotIn && disjoint(r.Values, want.Values):
			return true
		case r.Operator == v1.NodeSelectorOpIn && want.Operator == v1.NodeSelectorOpExists:
			return true
		}
	}
	return false
}

func containsAll(set, values []string) bool {
	for _, v := range values {
		if !slices.Contains(set, v) {
			return false
		}
	}
	return true
}

func disjoint(a, b []string) bool {
	for _, v := range a {
		if slices.Contains(b, v) {
			return false
		}
	}
	return true
}
