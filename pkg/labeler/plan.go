// Package labeler applies NodePoolLabelSets to nodes (pool-labeler's controller mode). It
// replaces the Banzai nodepool-labels-operator and keeps its CRs and its managed-labels
// annotation. cmd/pool-labeler/app assembles the command: the controller mode from here, its
// other modes (domain, webhook, handoff, handback, spread, certs) from their own packages.
package labeler

import (
	"encoding/json"
	"fmt"
	"sort"

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
}

// Empty reports whether the node needs no patch.
func (p *Plan) Empty() bool {
	return len(p.Set) == 0 && len(p.Remove) == 0 && !p.AnnotationChanged
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
	return json.Marshal(map[string]any{"metadata": meta})
}
