// Package admission is pool-scheduler's admission path: what a new pod in an opted-in namespace
// gets (schedulerName, and a required node-affinity term that keeps user pods off system nodes,
// so cluster-autoscaler and Karpenter, which simulate only the in-tree plugins, see
// SystemPoolGuard's decision). The mutating webhook (pool-labeler webhook) applies Mutator; the
// MutatingAdmissionPolicy (RenderPolicy) expresses the same mutation in CEL.
package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

const (
	// DefaultSchedulerName is the name kube-apiserver defaults an empty schedulerName to.
	DefaultSchedulerName = v1.DefaultSchedulerName
)

// Mutator changes new pods for pool-scheduler. Immutable after NewMutator; safe for concurrent use.
type Mutator struct {
	schedulerName string
	system        pool.SystemPolicy
	// avoidSystem are alternatives (ORed) of requirements (ANDed) that a node matches only when
	// it is not a system node; nil when no system node can be told by labels, or when disabled.
	avoidSystem [][]v1.NodeSelectorRequirement
	// spread is DegradedSpread of the profile's DomainSpread args (nil: none).
	spread []v1.TopologySpreadConstraint
}

// Result says what Mutate changed.
type Result struct {
	// SchedulerName: the pod was handed to pool-scheduler, its schedulerName set and
	// profile.HandedOverAnnotation with it (what the hand-off controller hands back).
	SchedulerName bool
	NodeAffinity  bool
	// TopologySpread: the degraded spread was added (MutateDegraded only).
	TopologySpread bool
}

// Changed reports whether the pod was changed.
func (r Result) Changed() bool { return r.SchedulerName || r.NodeAffinity || r.TopologySpread }

// NewMutator builds the mutation for the profile schedulerName whose SystemPoolGuard has args
// guard (defaulted and validated). With systemNodeAffinity false, or guard nil (the guard is
// not enabled), only schedulerName is set.
func NewMutator(schedulerName string, guard *config.SystemPoolGuardArgs, systemNodeAffinity bool) (*Mutator, error) {
	if schedulerName == "" {
		return nil, fmt.Errorf("schedulerName: must not be empty")
	}
	m := &Mutator{schedulerName: schedulerName}
	if guard == nil || !systemNodeAffinity {
		return m, nil
	}
	system, err := pool.NewSystemPolicy(guard)
	if err != nil {
		return nil, err
	}
	m.system = system
	if m.avoidSystem, err = pool.AvoidSystemNodes(guard); err != nil {
		return nil, err
	}
	return m, nil
}

// WithDegradedSpread makes MutateDegraded give pods of a workload DegradedSpread(args): the
// spread the default scheduler can keep while pool-scheduler does not run.
func (m *Mutator) WithDegradedSpread(args *config.DomainSpreadArgs) *Mutator {
	m.spread = DegradedSpread(args)
	return m
}

// SchedulerName is the name Mutate sets.
func (m *Mutator) SchedulerName() string { return m.schedulerName }

// AvoidSystem returns the node-affinity alternatives Mutate adds (nil: none).
func (m *Mutator) AvoidSystem() [][]v1.NodeSelectorRequirement { return m.avoidSystem }

// Mutate changes pod in place: a pod it hands to pool-scheduler gets profile.HandedOverAnnotation
// too, so only pods admission handed over are ever handed back. It leaves alone pods already bound (spec.nodeName: no scheduler
// sees them), mirror pods, DaemonSet pods (node agents gain nothing from pool-scheduler and must
// not depend on it), pods labelled profile.NamespaceLabel=false, and pods that name a scheduler
// other than the default one or ours.
// The affinity goes to pods scheduled by pool-scheduler that are not system pods.
func (m *Mutator) Mutate(pod *v1.Pod) Result { return m.mutate(pod, true) }

// MutateDegraded is Mutate while no healthy pool-scheduler runs (the webhook's hand-off check):
// the pod keeps the default scheduler, which the pod would otherwise wait for in vain, and gets
// what the default scheduler's in-tree plugins can enforce: the system-node affinity, for user
// pods, and the workload's spread over DomainSpread's dimensions (WithDegradedSpread). A pod
// that names pool-scheduler itself keeps it, and gets no spread (DomainSpread spreads it).
func (m *Mutator) MutateDegraded(pod *v1.Pod) Result { return m.mutate(pod, false) }

func (m *Mutator) mutate(pod *v1.Pod, handOff bool) Result {
	var r Result
	if pod.Spec.NodeName != "" {
		return r
	}
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return r
	}
	if pod.Labels[profile.NamespaceLabel] == "false" || pool.IsDaemonSetPod(pod) {
		return r
	}
	switch pod.Spec.SchedulerName {
	case "", DefaultSchedulerName:
		if handOff {
			pod.Spec.SchedulerName = m.schedulerName
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[profile.HandedOverAnnotation] = m.schedulerName
			r.SchedulerName = true
		} else {
			r.TopologySpread = addSpread(pod, m.spread)
		}
	case m.schedulerName:
	default:
		return r
	}
	if m.avoidSystem != nil && !m.system.IsSystemPod(pod) {
		r.NodeAffinity = addRequired(pod, m.avoidSystem)
	}
	return r
}

// addRequired ANDs alts (ORed alternatives) into the pod's required node affinity: every
// existing term t becomes the terms t AND alt, one per alternative. Terms are ORed, so adding a
// term instead would loosen what the pod asked for. Empty terms match no node and stay as they
// are. A pod whose terms already hold an alternative each is left unchanged (reinvocation, or
// both the policy and the webhook installed).
func addRequired(pod *v1.Pod, alts [][]v1.NodeSelectorRequirement) bool {
	aff := pod.Spec.Affinity
	if aff == nil {
		aff = &v1.Affinity{}
	}
	na := aff.NodeAffinity
	if na == nil {
		na = &v1.NodeAffinity{}
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	var terms []v1.NodeSelectorTerm
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		for _, a := range alts {
			terms = append(terms, v1.NodeSelectorTerm{MatchExpressions: slices.Clone(a)})
		}
	} else {
		changed := false
		for _, t := range req.NodeSelectorTerms {
			if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 || holdsAlternative(t, alts) {
				terms = append(terms, t)
				continue
			}
			changed = true
			for _, a := range alts {
				nt := *t.DeepCopy()
				nt.MatchExpressions = append(nt.MatchExpressions, a...)
				terms = append(terms, nt)
			}
		}
		if !changed {
			return false
		}
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{NodeSelectorTerms: terms}
	aff.NodeAffinity = na
	pod.Spec.Affinity = aff
	return true
}

func holdsAlternative(t v1.NodeSelectorTerm, alts [][]v1.NodeSelectorRequirement) bool {
	for _, a := range alts {
		all := true
		for _, r := range a {
			if !slices.ContainsFunc(t.MatchExpressions, func(e v1.NodeSelectorRequirement) bool {
				return e.Key == r.Key && e.Operator == r.Operator && slices.Equal(e.Values, r.Values)
			}) {
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
