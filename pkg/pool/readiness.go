package pool

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// Cause is why a node is not ready for pods. The set is small and fixed so that scheduling
// events aggregate; details live in Verdict.
type Cause int

const (
	// Ready means nothing holds the node back.
	Ready Cause = iota
	// UnknownPool: the node carries no pool label and the policy rejects such nodes.
	UnknownPool
	// MalformedAnnotation: the managed-labels annotation cannot be read, so stale labels cannot be ruled out.
	MalformedAnnotation
	// LabelsNotApplied: a label of the pool's NodePoolLabelSet is missing or has another value.
	LabelsNotApplied
	// StaleLabel: a label the labeler applied and the pool no longer wants is still on the node.
	StaleLabel
	// MissingRequiredLabel: a configured required label key is absent.
	MissingRequiredLabel
	// LabelSetConflict: NodePoolLabelSets of the node's pool disagree on a label, and the node
	// carries none of their values.
	LabelSetConflict
	// LabelSetNotVisible: no NodePoolLabelSet of the node's pool is read, yet other nodes of the
	// pool carry labels a labeler applied (a managed-labels annotation naming keys), and this
	// node carries none: its pool is labelled from a set in a namespace the gate does not read.
	LabelSetNotVisible
)

var causeMessages = [...]string{
	Ready:                "node is ready",
	UnknownPool:          "node is not in a known pool",
	MalformedAnnotation:  "node's managed-labels annotation is malformed",
	LabelsNotApplied:     "node's pool labels are not applied yet",
	StaleLabel:           "node still has pool labels that are no longer wanted",
	MissingRequiredLabel: "node is missing a required label",
	LabelSetConflict:     "node's pool has NodePoolLabelSets that disagree on a label",
	LabelSetNotVisible:   "node's pool is labelled from a NodePoolLabelSet in a namespace the scheduler does not read (labelSetNamespaces)",
}

// Causes lists every not-ready cause, for metrics and docs.
var Causes = []Cause{UnknownPool, LabelsNotApplied, MalformedAnnotation, StaleLabel, MissingRequiredLabel, LabelSetConflict, LabelSetNotVisible}

// String is the fixed, user-facing reason for the cause.
func (c Cause) String() string {
	if c < 0 || int(c) >= len(causeMessages) {
		return "unknown cause"
	}
	return causeMessages[c]
}

// Verdict is the outcome of a readiness check with the detail needed to act on it.
type Verdict struct {
	Cause Cause
	// Pool is the node's pool ("" if unknown).
	Pool string
	// Key is the label key at fault, Want the desired value (LabelsNotApplied; for
	// LabelSetConflict the values the sets give, joined by "|"), Got the node's value. For
	// LabelSetNotVisible from a set in an unread namespace: Want those namespaces, Got the
	// namespaces read (LabelSets.WithUnreadSets).
	Key, Want, Got string
	// Missing is set when the node does not carry Key at all (Got is then "").
	Missing bool
}

// Ready reports whether the node may be used.
func (v Verdict) Ready() bool { return v.Cause == Ready }

// Gate decides whether a node's pool state is applied. It is immutable after construction and
// safe for concurrent use; Check allocates only to read a managed-labels annotation that is not
// the pool's in-sync one (the labeler's format).
type Gate struct {
	Identity          Identity
	UnknownPoolPolicy config.UnknownPoolPolicy
	// RequiredLabelKeys must be on every node; PoolRequiredLabelKeys on the nodes of one pool.
	RequiredLabelKeys     []string
	PoolRequiredLabelKeys map[string][]string
	// SystemNodeKeys are the labels SystemPoolGuard's systemNodeSelector reads
	// (NewGateWithSystemArgs): label sets may not set them (RefusedKey).
	SystemNodeKeys []string
}

// CompileLabelSets is CompileLabelSetsFor with the gate's pool-identity and system-node keys: the
// sets as this gate judges nodes by them.
func (g *Gate) CompileLabelSets(sets []*labelsv1alpha1.NodePoolLabelSet) *LabelSets {
	return compileLabelSets(g.Identity, g.SystemNodeKeys, sets)
}

// Refused is RefusedKey with the gate's system-node keys.
func (g *Gate) Refused(key string) string {
	return RefusedKey(key, g.SystemNodeKeys)
}

// Check evaluates a node (its labels and annotations) against the pool's desired labels.
// Causes are checked in a fixed order, so the first one found is reported consistently.
func (g *Gate) Check(nodeLabels, nodeAnnotations map[string]string, sets *LabelSets) Verdict {
	if sets == nil {
		sets = EmptyLabelSets
	}
	poolName, known := g.Identity.PoolOf(nodeLabels)
	if !known && g.rejectsUnknown(sets) {
		return Verdict{Cause: UnknownPool}
	}
	var desired *PoolLabels
	if known {
		desired = sets.desired(poolName)
	}
	if desired == nil && known && sets.labelledElsewhere(poolName) && !Labelled(nodeAnnotations) {
		// Want names the unread namespaces holding a set of the pool, Got the namespaces read.
		return Verdict{Cause: LabelSetNotVisible, Pool: poolName, Want: strings.Join(sets.unread[poolName], ","), Got: strings.Join(sets.read, ",")}
	}
	if desired != nil {
		for _, l := range desired.Labels {
			if got, ok := nodeLabels[l.Key]; !ok || got != l.Value {
				return Verdict{Cause: LabelsNotApplied, Pool: poolName, Key: l.Key, Want: l.Value, Got: got, Missing: !ok}
			}
		}
		for i := range desired.Conflicts {
			c := &desired.Conflicts[i]
			if got, ok := nodeLabels[c.Key]; !ok || !slices.Contains(c.Values, got) {
				return Verdict{Cause: LabelSetConflict, Pool: poolName, Key: c.Key, Want: strings.Join(c.Values, "|"), Got: got, Missing: !ok}
			}
		}
	}
	if v := g.checkStale(poolName, nodeLabels, nodeAnnotations, desired); !v.Ready() {
		return v
	}
	for _, k := range g.RequiredLabelKeys {
		if _, ok := nodeLabels[k]; !ok {
			return Verdict{Cause: MissingRequiredLabel, Pool: poolName, Key: k}
		}
	}
	if known {
		for _, k := range g.PoolRequiredLabelKeys[poolName] {
			if _, ok := nodeLabels[k]; !ok {
				return Verdict{Cause: MissingRequiredLabel, Pool: poolName, Key: k}
			}
		}
	}
	return Verdict{Cause: Ready, Pool: poolName}
}

func (g *Gate) rejectsUnknown(sets *LabelSets) bool {
	switch g.UnknownPoolPolicy {
	case config.UnknownPoolAllow:
		return false
	case config.UnknownPoolReject:
		return true
	default:
		return sets.Len() > 0
	}
}

func (g *Gate) checkStale(poolName string, nodeLabels, nodeAnnotations map[string]string, desired *PoolLabels) Verdict {
	annotation, ok := nodeAnnotations[ManagedLabelsAnnotation]
	if !ok || desired == nil || annotation == desired.inSyncAnnotation || desired.Unreadable {
		// Nothing managed, or exactly the desired keys: no key can be stale. Nor without a set
		// of the pool in view: stale means a label a visible set stopped wanting, and the set
		// that wants these may live in a namespace the gate does not read (the annotation is
		// not read at all then, so a malformed one holds nothing either). Nor with a set of the
		// pool unreadable: any managed key might be one it wants (see PoolLabels.Unreadable).
		return Verdict{Cause: Ready}
	}
	keys, err := ParseManagedLabels(annotation)
	if err != nil {
		return Verdict{Cause: MalformedAnnotation, Pool: poolName, Got: annotation}
	}
	for _, key := range keys {
		if _, wanted := desired.Desired(key); wanted || desired.Conflict(key) != nil || IsIdentityKey(g.Identity, key) || g.Refused(key) != "" {
			// A conflicting key is not stale: the labeler leaves it, and the check above judged
			// it. Nor is a pool-identity label (Banzai's operator managed its own pool label):
			// nothing may remove it, and it names the node's pool. Nor a key no set may name (a
			// domain label a set recorded before the CRD refused it, a reserved or system-node
			// label): the labeler may not remove it either (its admission policy refuses that).
			continue
		}
		if got, present := nodeLabels[key]; present {
			return Verdict{Cause: StaleLabel, Pool: poolName, Key: key, Got: got}
		}
	}
	return Verdict{Cause: Ready}
}

// HeldReason is the verdict's reason as NodePoolLabelSet status and poolctl report it: the
// cause, with LabelsNotApplied split into a missing label and a wrong value. "" when ready.
func (v Verdict) HeldReason() labelsv1alpha1.HeldReason {
	switch v.Cause {
	case UnknownPool:
		return labelsv1alpha1.HeldUnknownPool
	case MalformedAnnotation:
		return labelsv1alpha1.HeldMalformedAnnotation
	case LabelsNotApplied:
		if v.Missing {
			return labelsv1alpha1.HeldMissingLabel
		}
		return labelsv1alpha1.HeldWrongValue
	case StaleLabel:
		return labelsv1alpha1.HeldStaleLabel
	case MissingRequiredLabel:
		return labelsv1alpha1.HeldMissingRequiredLabel
	case LabelSetConflict:
		return labelsv1alpha1.HeldLabelSetConflict
	case LabelSetNotVisible:
		return labelsv1alpha1.HeldLabelSetNotVisible
	}
	return ""
}

// HeldReasonString is the cause's HeldReason as text ("" when ready).
func (c Cause) HeldReasonString() string {
	return string(Verdict{Cause: c, Missing: true}.HeldReason())
}

// Detail says what holds the node, with the key and values: for events, logs and tools.
func (v Verdict) Detail() string {
	switch v.Cause {
	case Ready:
		return "ready"
	case UnknownPool:
		return "no pool label"
	case MalformedAnnotation:
		return fmt.Sprintf("%s is not a JSON array of keys: %q", ManagedLabelsAnnotation, v.Got)
	case LabelsNotApplied:
		if v.Missing {
			return fmt.Sprintf("label %s=%s missing", v.Key, v.Want)
		}
		return fmt.Sprintf("label %s is %q, want %q", v.Key, v.Got, v.Want)
	case StaleLabel:
		return fmt.Sprintf("stale label %s=%s (no NodePoolLabelSet wants it)", v.Key, v.Got)
	case MissingRequiredLabel:
		return fmt.Sprintf("required label %s missing", v.Key)
	case LabelSetNotVisible:
		if v.Want != "" {
			return fmt.Sprintf("NodePoolLabelSet %q is in namespace %s, which the scheduler does not read (labelSetNamespaces: %s): "+
				"held until a labeler labels it; fix: helm upgrade pool-scheduler manifests/charts/pool-scheduler -n pool-scheduler --reuse-values --set 'labelSets.namespaces={%s}'",
				v.Pool, v.Want, v.Got, strings.Trim(v.Got+","+v.Want, ","))
		}
		return fmt.Sprintf("no NodePoolLabelSet %q is read, but other nodes of the pool carry labels a labeler applied (%s) and this one none: "+
			"its set lives in a namespace outside labelSetNamespaces", v.Pool, ManagedLabelsAnnotation)
	case LabelSetConflict:
		if v.Missing {
			return fmt.Sprintf("label %s missing, and the pool's NodePoolLabelSets disagree on it (%s)", v.Key, v.Want)
		}
		return fmt.Sprintf("label %s is %q, and the pool's NodePoolLabelSets disagree on it (%s)", v.Key, v.Got, v.Want)
	}
	return v.Cause.String()
}
