package pool

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
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
	// CRD's validation was bypassed), pool-identity keys, unreadable sets and conflicts between
	// sets of the same pool in several namespaces.
	Problems []string
	// Ignored are the labels dropped for a reason of their own (invalid, refused, a pool-identity
	// key with another pool's name), each also in Problems, in the order of Sources.
	Ignored []IgnoredLabel
	// Conflicts are the keys that sets of the pool (in several namespaces) give different
	// values, sorted by key. No value of theirs is desired: the labeler neither sets, changes nor
	// removes the key, and the scheduler holds a node of the pool until it carries one of the
	// values (Gate.Check), so a new node waits for the sets to agree and a node that already
	// carries a value keeps working.
	Conflicts []LabelConflict
	// IdentityLabels are pool-identity labels the sets give the pool's own name (Banzai's CRs set
	// nodepool.banzaicloud.io/name so). They name the pool the node is already in, so they are
	// never enforced nor written: the labeler may not change pool-identity labels (its
	// ValidatingAdmissionPolicy refuses it), and a node of the pool need not carry them.
	IdentityLabels []Label

	// Unreadable is set when a set of the pool has a spec that does not decode (see
	// NodePoolLabelSetSpec.DecodeError): its labels are unknown. One rule for every node of the
	// pool, labelled before or not: the labeler changes none of them, and the scheduler judges
	// them by the pool's readable sets alone and counts no managed label as stale (it might be
	// one the unreadable set wants), so a pre-labelled node and a new node are treated alike.
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

// IgnoredLabel is a label of a NodePoolLabelSet that is neither applied nor waited for.
type IgnoredLabel struct {
	// Source is the set ("namespace/name"); Message says which label and why, as in Problems.
	Source, Key, Value, Message string
}

// LabelConflict is a key that NodePoolLabelSets of one pool give different values.
type LabelConflict struct {
	Key string
	// Values are the distinct values, sorted; Sources the sets ("namespace/name") giving any.
	Values, Sources []string
	// Message names the key, each value and the sets that give it.
	Message string
}

// Conflict returns the pool's conflict on key, or nil.
func (p *PoolLabels) Conflict(key string) *LabelConflict {
	if p == nil {
		return nil
	}
	for i := range p.Conflicts {
		if p.Conflicts[i].Key == key {
			return &p.Conflicts[i]
		}
	}
	return nil
}

// Desired returns the desired value of key and whether the pool wants it at all.
func (p *PoolLabels) Desired(key string) (string, bool) {
	if p == nil {
		return "", false
	}
	v, ok := p.byKey[key]
	return v, ok
}

// LabelSets is an immutable index of NodePoolLabelSets by pool name, with the pools a labeler
// has labelled nodes of (see WithLabelledPools).
type LabelSets struct {
	byPool map[string]*PoolLabels
	count  int
	// labelled are the pools some node of which carries a managed-labels annotation naming a key.
	labelled map[string]struct{}
	// deleted are pools whose last set in view was seen deleted (WithDeletedPools).
	deleted map[string]struct{}
	// unread are the pools with a set in a namespace not read, and those namespaces; read the
	// namespaces that are (WithUnreadSets).
	unread map[string][]string
	read   []string
}

// deletedPoolLabels is the desired state of a pool whose set was deleted in view: nothing, so
// every managed label still on a node is stale.
var deletedPoolLabels = &PoolLabels{byKey: map[string]string{}, inSyncAnnotation: FormatManagedLabels(nil)}

// EmptyLabelSets is the index of a cluster without NodePoolLabelSets.
var EmptyLabelSets = &LabelSets{}

// CompileLabelSets is CompileLabelSetsFor with the default pool-identity keys, those the CRD
// knows.
func CompileLabelSets(sets []*labelsv1alpha1.NodePoolLabelSet) *LabelSets {
	return CompileLabelSetsFor(Identity{}, sets)
}

// CompileLabelSetsFor indexes sets by pool (a set's name is its pool's name). A pool with sets
// in several namespaces gets the union of their labels. A key they give different values is a
// conflict: no value is desired (neither wins), the key is listed in Conflicts with every value,
// and it is reported in Problems (see Gate.Check and the labeler for what is then enforced).
// Invalid entries are dropped and reported: no node could ever carry them. So are labels on a
// pool-identity key with another pool's name (ValidateLabelFor).
func CompileLabelSetsFor(id Identity, sets []*labelsv1alpha1.NodePoolLabelSet) *LabelSets {
	return compileLabelSets(id, nil, sets)
}

// compileLabelSets is CompileLabelSetsFor that also drops and reports labels on systemNodeKeys
// (Gate.CompileLabelSets).
func compileLabelSets(id Identity, systemNodeKeys []string, sets []*labelsv1alpha1.NodePoolLabelSet) *LabelSets {
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
	// values[pool][key][value] lists the sets ("namespace/name") giving key that value.
	values := map[string]map[string]map[string][]string{}
	for _, set := range sorted {
		p := idx.byPool[set.Name]
		if p == nil {
			p = &PoolLabels{byKey: make(map[string]string, len(set.Spec.Labels))}
			idx.byPool[set.Name] = p
			values[set.Name] = map[string]map[string][]string{}
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
			if msgs := validateLabelFor(id, systemNodeKeys, set.Name, k, v); len(msgs) > 0 {
				msg := fmt.Sprintf("%s: label %q=%q ignored: %s", source, k, v, msgs[0])
				p.Problems = append(p.Problems, msg)
				p.Ignored = append(p.Ignored, IgnoredLabel{Source: source, Key: k, Value: v, Message: msg})
				continue
			}
			if IsIdentityKey(id, k) {
				if !slices.Contains(p.IdentityLabels, Label{k, v}) {
					p.IdentityLabels = append(p.IdentityLabels, Label{k, v})
				}
				continue
			}
			byValue := values[set.Name][k]
			if byValue == nil {
				byValue = map[string][]string{}
				values[set.Name][k] = byValue
			}
			byValue[v] = append(byValue[v], source)
		}
	}
	for name, p := range idx.byPool {
		sort.Slice(p.IdentityLabels, func(i, j int) bool { return p.IdentityLabels[i].Key < p.IdentityLabels[j].Key })
		keys := make([]string, 0, len(values[name]))
		for k := range values[name] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.Labels = make([]Label, 0, len(keys))
		for _, k := range keys {
			byValue := values[name][k]
			if len(byValue) == 1 {
				for v := range byValue {
					p.byKey[k] = v
					p.Labels = append(p.Labels, Label{Key: k, Value: v})
				}
				continue
			}
			c := LabelConflict{Key: k}
			for v := range byValue {
				c.Values = append(c.Values, v)
			}
			sort.Strings(c.Values)
			var parts []string
			for _, v := range c.Values {
				parts = append(parts, fmt.Sprintf("%q in %s", v, strings.Join(byValue[v], ", ")))
				c.Sources = append(c.Sources, byValue[v]...)
			}
			sort.Strings(c.Sources)
			c.Message = fmt.Sprintf("label %q has conflicting values: %s; none is applied until they agree", k, strings.Join(parts, "; "))
			p.Conflicts = append(p.Conflicts, c)
			p.Problems = append(p.Problems, c.Message)
		}
		keys = keys[:0]
		for _, l := range p.Labels {
			keys = append(keys, l.Key)
		}
		p.inSyncAnnotation = FormatManagedLabels(keys)
	}
	return idx
}

// identityKeyMessage says why a label on a pool-identity key is refused (as the CRD says it).
const identityKeyMessage = "a pool-identity key may only be set to the set's own name: another value would move the node to another pool"

// Len is the number of NodePoolLabelSets indexed.
func (s *LabelSets) Len() int { return s.count }

// Pool returns the desired state of a pool, or nil if no NodePoolLabelSet names it.
func (s *LabelSets) Pool(name string) *PoolLabels { return s.byPool[name] }

// WithLabelledPools returns the index with pools as the pools some node of which a labeler has
// labelled (Labelled). A labelled pool without a NodePoolLabelSet here is labelled from a set
// the gate does not read: its unlabelled nodes are held (LabelSetNotVisible), its labelled ones
// are not judged stale. The evidence is the nodes' own annotation, written by whoever may write
// nodes, never a set in a namespace outside the gate's: a set there could otherwise hold a pool.
// s is not changed; the result shares its compiled sets.
func (s *LabelSets) WithLabelledPools(pools []string) *LabelSets {
	out := *s
	out.labelled = poolSet(pools)
	return &out
}

// WithUnreadSets returns the index with unread as the pools that have a NodePoolLabelSet in a
// namespace outside read (the gate's labelSetNamespaces), and those namespaces. Such a pool is
// held like a pool labelled from a set not in view, from its first node on: its nodes without a
// labeler's annotation are held (LabelSetNotVisible) until labelled. Sets there are evidence to
// hold, never to label or to judge stale: holding is the safe direction, and who may create
// NodePoolLabelSets at all is cluster-admin's choice (the CRD grants no aggregated role).
// s is not changed.
func (s *LabelSets) WithUnreadSets(unread map[string][]string, read []string) *LabelSets {
	out := *s
	out.unread, out.read = unread, read
	return &out
}

// WithDeletedPools returns the index with pools as the pools whose last NodePoolLabelSet in view
// was seen deleted while their nodes still carry labels it applied: the set stopped wanting
// them, so they are stale (not labelled from a set out of view). s is not changed.
func (s *LabelSets) WithDeletedPools(pools []string) *LabelSets {
	out := *s
	out.deleted = poolSet(pools)
	return &out
}

// poolSet is pools as a set (nil when empty).
func poolSet(pools []string) map[string]struct{} {
	if len(pools) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(pools))
	for _, p := range pools {
		set[p] = struct{}{}
	}
	return set
}

// desired is the pool's desired state for the gate: its sets', or nothing for a pool whose last
// set was seen deleted, or nil.
func (s *LabelSets) desired(pool string) *PoolLabels {
	if p := s.byPool[pool]; p != nil {
		return p
	}
	if _, ok := s.deleted[pool]; ok {
		return deletedPoolLabels
	}
	return nil
}

// labelledElsewhere reports whether pool is labelled by a labeler from a set not in view.
func (s *LabelSets) labelledElsewhere(pool string) bool {
	_, labelled := s.labelled[pool]
	_, unread := s.unread[pool]
	if !labelled && !unread {
		return false
	}
	return s.desired(pool) == nil
}

// NotVisible returns the pools labelled from NodePoolLabelSets not in view (nodes carry a
// managed-labels annotation naming keys, and no set of the pool is read), sorted.
func (s *LabelSets) NotVisible() []string {
	var out []string
	for p := range s.labelled {
		if s.desired(p) == nil {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// LabelledPools returns the pools of the nodes a labeler has labelled (Labelled), sorted: the
// argument of WithLabelledPools for tools that list nodes.
func LabelledPools[N any](id Identity, nodes []N, labelsOf func(N) (labels, annotations map[string]string)) []string {
	seen := map[string]struct{}{}
	for _, n := range nodes {
		l, a := labelsOf(n)
		if p, ok := id.PoolOf(l); ok && Labelled(a) {
			seen[p] = struct{}{}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Pools returns the names of the pools that have a NodePoolLabelSet, sorted.
func (s *LabelSets) Pools() []string {
	names := make([]string, 0, len(s.byPool))
	for n := range s.byPool {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValidateLabelFor returns why the NodePoolLabelSet of pool cannot set the label on its nodes,
// or nothing: ValidateLabel's reasons, and a pool-identity key (id's or a default one) with a
// value other than pool, which would move the node to another pool, whose set would move it
// back, forever. The pool's own name is allowed: it moves nothing, and Banzai's CRs set
// nodepool.banzaicloud.io/name so. The CRD refuses the same for the default keys.
func ValidateLabelFor(id Identity, pool, key, value string) []string {
	return validateLabelFor(id, nil, pool, key, value)
}

// validateLabelFor is ValidateLabelFor that also refuses systemNodeKeys (RefusedKey).
func validateLabelFor(id Identity, systemNodeKeys []string, pool, key, value string) []string {
	msgs := validateLabel(key, value, systemNodeKeys)
	if len(msgs) == 0 && value != pool && IsIdentityKey(id, key) {
		msgs = append(msgs, identityKeyMessage)
	}
	return msgs
}

// IsIdentityKey reports whether key names a node's pool: one of id's keys or of the default
// ones. No component ever writes, removes or requires such a label on a pool's behalf.
func IsIdentityKey(id Identity, key string) bool {
	return slices.Contains(configv1.DefaultPoolLabelKeys, key) || slices.Contains(id.LabelKeys(), key)
}

// ValidateLabel returns why a NodePoolLabelSet cannot set a label on a node, or nothing, as the
// CRD says it: invalid keys and values, and the keys RefusedKey refuses without configuration
// (reserved kubernetes.io and k8s.io keys, the domain labeler's).
func ValidateLabel(key, value string) []string {
	return validateLabel(key, value, nil)
}

func validateLabel(key, value string, systemNodeKeys []string) []string {
	msgs := validation.IsQualifiedName(key)
	if len(msgs) == 0 {
		if why := RefusedKey(key, systemNodeKeys); why != "" {
			msgs = append(msgs, why)
		}
	}
	return append(msgs, validation.IsValidLabelValue(value)...)
}

// RefusedKey returns why no NodePoolLabelSet may set key, or "" if one may: a reserved
// kubernetes.io/k8s.io key (IsReservedKey), a domain labeler's key (IsDomainKey), or one of
// systemNodeKeys (SystemNodeKeys of SystemPoolGuard's args). These are the keys the labeler's
// admission policy (pool-labeler-managed-labels) refuses whatever a write declares managed, and
// it refuses the whole write: a set naming one would leave its pool's nodes without any of its
// labels, held by the gate forever. So the controller and the gate ignore such a key and report
// it, and the set's other labels still apply. The CRD refuses the first two; the system-node
// keys are configuration it cannot know.
func RefusedKey(key string, systemNodeKeys []string) string {
	switch {
	case IsReservedKey(key):
		return reservedKeyMessage
	case IsDomainKey(key):
		return domainKeyMessage
	case slices.Contains(systemNodeKeys, key):
		return systemNodeKeyMessage
	}
	return ""
}

// Why each kind of key is refused (reserved and domain keys as the CRD says it).
const (
	reservedKeyMessage   = "the kubernetes.io and k8s.io domains are reserved for Kubernetes, and kubernetes.azure.com/managed, kubernetes.azure.com/resource-group and the control-plane roles take nodes out of Azure's load balancers"
	systemNodeKeyMessage = "SystemPoolGuard's systemNodeSelector reads this label: a NodePoolLabelSet may not turn nodes into or out of system nodes (mark the system pool at node registration, or name it in systemPools)"
)

// IsDomainKey reports whether key is one of the domain labeler's (configv1.DomainLabelPrefix).
// Each node's domain labeler writes them; a NodePoolLabelSet naming one would have the
// controller put its value back every time the domain labeler rewrites its own, forever. No set
// may name them (the CRD refuses them), and a set stored before that rule is not obeyed: the
// key is dropped and reported (ValidateLabel), never written nor removed by the controller, and
// never stale (the controller's admission policy refuses writes to it).
func IsDomainKey(key string) bool {
	return strings.HasPrefix(key, configv1.DomainLabelPrefix)
}

// domainKeyMessage says why a domain key is refused (as the CRD says it).
const domainKeyMessage = "keys under " + configv1.DomainLabelPrefix + " are written on each node by pool-labeler's domain mode and cannot be set by a NodePoolLabelSet"

// IsReservedKey reports whether key's prefix is in the kubernetes.io or k8s.io domain (exact
// domain or a subdomain, never a substring match), except node-role.kubernetes.io and
// node-restriction.kubernetes.io, which exist to be set by cluster operators; and whether it is
// one of LoadBalancerExclusionKeys.
func IsReservedKey(key string) bool {
	if slices.Contains(LoadBalancerExclusionKeys, key) {
		return true
	}
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

// LoadBalancerExclusionKeys are labels outside the kubernetes.io domains with which
// cloud-provider-azure keeps a node out of its load balancers' backend pools (pkg/azurelb
// Exclusion): a labeler writing them could take every node out of every LoadBalancer Service.
// node.kubernetes.io/exclude-from-external-load-balancers is reserved with its domain.
var LoadBalancerExclusionKeys = []string{
	"kubernetes.azure.com/managed", "kubernetes.azure.com/resource-group",
	"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master",
}

func hasDotSuffix(s, domain string) bool {
	return len(s) > len(domain)+1 && s[len(s)-len(domain):] == domain && s[len(s)-len(domain)-1] == '.'
}
