package pool

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// Label is one desired node label.
type Label struct {
	Key, Value string
}

// PoolLabels is the merged desired state of one pool.
type PoolLabels struct {
	// Labels are the desired labels, sorted by key.
	Labels []Label
	// Sources are the NodePoolLabelSets ("namespace/name") merged into Labels, in precedence order.
	Sources []string
	// Problems describe entries that were dropped: invalid keys or values (possible only if the
	// CRD's validation was bypassed) and conflicts between sets of the same pool in several namespaces.
	Problems []string

	// Unreadable is set when a set of the pool has a spec that does not decode (see
	// NodePoolLabelSetSpec.DecodeError): its labels are unknown, so the labeler leaves the pool's
	// nodes alone, while the scheduler, which cannot wait for unknown labels, judges them by the
	// pool's other sets (if any).
	Unreadable bool

	byKey map[string]string
	// inSyncAnnotation is the managed-labels annotation of a node that carries exactly this
	// set's labels, as the labeler writes it; a node with it has no stale labels to look for.
	inSyncAnnotation string
}

// ManagedLabelsAnnotation is the managed-labels annotation value for a node in sync with the pool.
func (p *PoolLabels) ManagedLabelsAnnotation() string {
	if p == nil {
		return FormatManagedLabels(nil)
	}
	return p.inSyncAnnotation
}

// Desired returns the desired value of key and whether the pool wants it at all.
func (p *PoolLabels) Desired(key string) (string, bool) {
	if p == nil {
		return "", false
	}
	v, ok := p.byKey[key]
	return v, ok
}

// LabelSets is an immutable index of NodePoolLabelSets by pool name.
type LabelSets struct {
	byPool map[string]*PoolLabels
	count  int
}

// EmptyLabelSets is the index of a cluster without NodePoolLabelSets.
var EmptyLabelSets = &LabelSets{}

// CompileLabelSets indexes sets by pool (a set's name is its pool's name). A pool with sets in
// several namespaces gets their union; where two sets disagree on a key, the set in the
// alphabetically first namespace wins and the conflict is reported in Problems. Invalid entries
// are dropped and reported: no node could ever carry them.
func CompileLabelSets(sets []*labelsv1alpha1.NodePoolLabelSet) *LabelSets {
	if len(sets) == 0 {
		return EmptyLabelSets
	}
	sorted := append([]*labelsv1alpha1.NodePoolLabelSet(nil), sets...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Name != sorted[j].Name {
			return sorted[i].Name < sorted[j].Name
		}
		return sorted[i].Namespace < sorted[j].Namespace
	})
	idx := &LabelSets{byPool: make(map[string]*PoolLabels, len(sorted)), count: len(sorted)}
	// winner[pool][key] is the set whose value of key is desired, named in conflict problems.
	// (Not simply the pool's first set: that one need not have the key at all.)
	winner := map[string]map[string]string{}
	for _, set := range sorted {
		p := idx.byPool[set.Name]
		if p == nil {
			p = &PoolLabels{byKey: make(map[string]string, len(set.Spec.Labels))}
			idx.byPool[set.Name] = p
			winner[set.Name] = map[string]string{}
		}
		source := set.Namespace + "/" + set.Name
		p.Sources = append(p.Sources, source)
		if set.Spec.DecodeError != "" {
			p.Unreadable = true
			p.Problems = append(p.Problems, fmt.Sprintf("%s: spec cannot be read, set ignored: %s", source, set.Spec.DecodeError))
			continue
		}
		keys := make([]string, 0, len(set.Spec.Labels))
		for k := range set.Spec.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := string(set.Spec.Labels[k])
			if msgs := ValidateLabel(k, v); len(msgs) > 0 {
				p.Problems = append(p.Problems, fmt.Sprintf("%s: label %q=%q ignored: %s", source, k, v, msgs[0]))
				continue
			}
			if prev, ok := p.byKey[k]; ok {
				if prev != v {
					p.Problems = append(p.Problems, fmt.Sprintf("%s: label %q=%q conflicts with %q from %s, which wins", source, k, v, prev, winner[set.Name][k]))
				}
				continue
			}
			p.byKey[k] = v
			winner[set.Name][k] = source
		}
	}
	for _, p := range idx.byPool {
		p.Labels = make([]Label, 0, len(p.byKey))
		for k, v := range p.byKey {
			p.Labels = append(p.Labels, Label{Key: k, Value: v})
		}
		sort.Slice(p.Labels, func(i, j int) bool { return p.Labels[i].Key < p.Labels[j].Key })
		keys := make([]string, len(p.Labels))
		for i, l := range p.Labels {
			keys[i] = l.Key
		}
		p.inSyncAnnotation = FormatManagedLabels(keys)
	}
	return idx
}

// Len is the number of NodePoolLabelSets indexed.
func (s *LabelSets) Len() int { return s.count }

// Pool returns the desired state of a pool, or nil if no NodePoolLabelSet names it.
func (s *LabelSets) Pool(name string) *PoolLabels { return s.byPool[name] }

// Pools returns the names of the pools that have a NodePoolLabelSet, sorted.
func (s *LabelSets) Pools() []string {
	names := make([]string, 0, len(s.byPool))
	for n := range s.byPool {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValidateLabel returns why a label cannot be set on a node, or nothing. Keys in the reserved
// kubernetes.io and k8s.io domains are refused, as the CRD refuses them.
func ValidateLabel(key, value string) []string {
	msgs := validation.IsQualifiedName(key)
	if len(msgs) == 0 && IsReservedKey(key) {
		msgs = append(msgs, "the kubernetes.io and k8s.io domains are reserved for Kubernetes")
	}
	return append(msgs, validation.IsValidLabelValue(value)...)
}

// IsReservedKey reports whether key's prefix is in the kubernetes.io or k8s.io domain (exact
// domain or a subdomain, never a substring match), except node-role.kubernetes.io and
// node-restriction.kubernetes.io, which exist to be set by cluster operators.
func IsReservedKey(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	switch prefix {
	case "node-role.kubernetes.io", "node-restriction.kubernetes.io":
		return false
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == domain || hasDotSuffix(prefix, domain) {
			return true
		}
	}
	return false
}

func hasDotSuffix(s, domain string) bool {
	return len(s) > len(domain)+1 && s[len(s)-len(domain):] == domain && s[len(s)-len(domain)-1] == '.'
}
