// Package labeler applies NodePoolLabelSets to nodes (pool-labeler's controller mode). It
// replaces the Banzai nodepool-labels-operator and keeps its CRs and its managed-labels
// annotation. cmd/pool-labeler/app assembles the command: the controller mode from here, its
// other modes (domain, webhook, handoff, handback, spread, certs) from their own packages.
// Its two controllers share one Controller: the node controller (controller.go: labels, the
// pool condition) and the status controller (status.go: each set's status).
package labeler

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Conflict is a desired label the node already carries with another value, set by someone else
// (the key is not in the node's managed-labels annotation).
type Conflict struct {
	Key, Want, Got string
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s=%q is set to %q by someone else", c.Key, c.Want, c.Got)
}

// Plan is what the labeler does to one node.
type Plan struct {
	// Set are labels to add or change, Remove labels to delete (managed, no longer desired).
	Set    map[string]string
	Remove []string
	// Annotation is the new managed-labels annotation value; AnnotationChanged says whether it
	// differs from the node's (including a malformed one being repaired).
	Annotation        string
	AnnotationChanged bool
	// Conflicts are desired labels left alone because someone else owns them.
	Conflicts []Conflict
	// MalformedAnnotation is set when the node's annotation could not be read; it is rewritten.
	MalformedAnnotation bool
	// Taints, when TaintsChanged, is the node's taint list without the startup taint
	// (LiftStartupTaint), written in the same patch as the labels.
	Taints        []corev1.Taint
	TaintsChanged bool
}

// Empty reports whether the node needs no patch.
func (p *Plan) Empty() bool {
	return len(p.Set) == 0 && len(p.Remove) == 0 && !p.AnnotationChanged && !p.TaintsChanged
}

// Applied returns the node's labels and annotations as they are once the plan is applied, for
// judging the node as it will be after the patch.
func (p *Plan) Applied(labels, annotations map[string]string) (map[string]string, map[string]string) {
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range p.Set {
		l[k] = v
	}
	for _, k := range p.Remove {
		delete(l, k)
	}
	a := annotations
	if p.AnnotationChanged {
		a = maps.Clone(annotations)
		if a == nil {
			a = map[string]string{}
		}
		a[pool.ManagedLabelsAnnotation] = p.Annotation
	}
	return l, a
}

// LiftStartupTaint adds to the plan the removal of every taint with key from taints (and of no
// other), if there is one. The caller decides when: once the node, as the plan leaves it, is
// ready by the gate's rule.
func (p *Plan) LiftStartupTaint(taints []corev1.Taint, key string) {
	if key == "" {
		return
	}
	kept := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != key {
			kept = append(kept, t)
		}
	}
	if len(kept) != len(taints) {
		p.Taints, p.TaintsChanged = kept, true
	}
}

// PlanNode computes the labels to apply to a node so that it carries its pool's desired labels
// (nil: the pool has no NodePoolLabelSet) and none of the managed labels no longer desired.
// It never touches labels it does not own: a desired key the node carries with another value,
// not listed in the managed-labels annotation, is a conflict, left alone unless overwrite is set.
func PlanNode(labels, annotations map[string]string, desired *pool.PoolLabels, overwrite bool) Plan {
	return PlanNodeFor(pool.Identity{}, labels, annotations, desired, overwrite)
}

// PlanNodeFor is PlanNode for the pool-identity keys of id (and the default ones): a managed
// identity label is never removed (nor ever set: CompileLabelSetsFor desires none), since the
// labeler may not move nodes between pools; it stays recorded as managed.
func PlanNodeFor(id pool.Identity, labels, annotations map[string]string, desired *pool.PoolLabels, overwrite bool) Plan {
	return PlanNodeForGate(&pool.Gate{Identity: id}, labels, annotations, desired, overwrite)
}

// PlanNodeForGate is PlanNodeFor with the gate's pool-identity keys and the keys it refuses
// (Gate.Refused), as the controller plans.
func PlanNodeForGate(g *pool.Gate, labels, annotations map[string]string, desired *pool.PoolLabels, overwrite bool) Plan {
	id := g.Identity
	plan := Plan{Set: map[string]string{}}
	current, hasAnnotation := annotations[pool.ManagedLabelsAnnotation]
	managed := map[string]bool{}
	if keys, err := pool.ParseManagedLabels(current); err != nil {
		// Unreadable: assume we own nothing (never delete on a guess) and rewrite it below.
		plan.MalformedAnnotation = true
	} else {
		for _, k := range keys {
			managed[k] = true
		}
	}

	var owned []string
	if desired != nil {
		for _, l := range desired.Labels {
			got, present := labels[l.Key]
			switch {
			case present && got == l.Value && !managed[l.Key] && !plan.MalformedAnnotation:
				// Someone else set it to the desired value (kubelet --node-labels, say): leave
				// it theirs, so dropping it from the set later does not delete their label. (With
				// a malformed annotation, the labeler's own record, it was most likely ours.)
				continue
			case present && got == l.Value:
			case present && !managed[l.Key] && !overwrite:
				plan.Conflicts = append(plan.Conflicts, Conflict{Key: l.Key, Want: l.Value, Got: got})
				continue
			default:
				plan.Set[l.Key] = l.Value
			}
			owned = append(owned, l.Key)
		}
	}
	for k := range managed {
		if _, want := desired.Desired(k); want {
			continue
		}
		if g.Refused(k) != "" {
			// No set may name it (recorded here by a set stored before the CRD refused such
			// keys, a domain labeler's one, or by another labeler: a reserved or system-node
			// label): the admission policy refuses any write that changes it, so it is neither
			// changed nor removed, and no longer ours: the annotation drops it.
			continue
		}
		if desired.Conflict(k) != nil || pool.IsIdentityKey(id, k) {
			// The pool's sets disagree on it, or it names the node's pool: neither set, changed
			// nor removed, but still ours.
			if _, present := labels[k]; present {
				owned = append(owned, k)
			}
			continue
		}
		if _, present := labels[k]; present {
			plan.Remove = append(plan.Remove, k)
		}
	}
	sort.Strings(plan.Remove)
	sort.Strings(owned)
	plan.Annotation = pool.FormatManagedLabels(owned)
	plan.AnnotationChanged = plan.MalformedAnnotation || current != plan.Annotation
	if !hasAnnotation && len(owned) == 0 {
		// Nothing owned and nothing recorded: do not add an empty annotation to every node.
		plan.AnnotationChanged = false
	}
	return plan
}

// MergePatch renders the plan as one JSON merge patch for the node. With a resourceVersion the
// apiserver refuses the patch if the node changed since it was read, so a plan made from a stale
// copy is never applied.
func (p *Plan) MergePatch(resourceVersion string) ([]byte, error) {
	labels := map[string]any{}
	for k, v := range p.Set {
		labels[k] = v
	}
	for _, k := range p.Remove {
		labels[k] = nil
	}
	meta := map[string]any{}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if p.AnnotationChanged {
		meta["annotations"] = map[string]any{pool.ManagedLabelsAnnotation: p.Annotation}
	}
	patch := map[string]any{"metadata": meta}
	if p.TaintsChanged {
		// A merge patch replaces the list whole; the resourceVersion above makes sure it is the
		// list this plan was made from, less the startup taint.
		patch["spec"] = map[string]any{"taints": p.Taints}
	}
	return json.Marshal(patch)
}
