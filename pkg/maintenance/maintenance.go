package maintenance

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// What maintenance writes on nodes (docs/maintenance.md has the sources).
const (
	// NodeImageVersionLabel is the node image AKS booted the node from; an upgrade (Kubernetes
	// version or node image) changes it on reimaged and surge nodes.
	NodeImageVersionLabel = "kubernetes.azure.com/node-image-version"
	// TaintToBeDeleted is cluster-autoscaler's NoSchedule taint on a node it drains to remove.
	TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"
	// TaintDeletionCandidate is cluster-autoscaler's PreferNoSchedule taint on a node it finds
	// unneeded: it is removed once it stays unneeded for scale-down-unneeded-time.
	TaintDeletionCandidate = "DeletionCandidateOfClusterAutoscaler"
	// KarpenterNodePoolLabel marks a node Karpenter (or AKS node auto-provisioning) created. Such
	// pools have no surge nodes: Karpenter replaces a drifted node with one that stays.
	KarpenterNodePoolLabel = "karpenter.sh/nodepool"
	// TaintKarpenterDisrupted is Karpenter's (and AKS node auto-provisioning's) NoSchedule taint
	// on a node it is about to disrupt.
	TaintKarpenterDisrupted = "karpenter.sh/disrupted"
)

// LifecycleConditions are the Node condition types of KEP-5683 ("Node Lifecycle Conditions",
// kubernetes/enhancements keps/sig-node/5683-lifecycle-conditions; alpha in Kubernetes 1.37,
// gate NodeLifecycleConditions): an admin or a maintenance controller sets one True on a node
// that is about to be, or is being, drained or maintained, and False (or removes it) after. Any
// of them True makes the node Leaving: a pod placed there now would move again.
var LifecycleConditions = [...]v1.NodeConditionType{
	"GracefulNodeShutdownInProgress", "DrainInProgress", "Drained", "MaintenancePlanned", "MaintenanceInProgress",
}

// InLifecycle reports whether one of the node's LifecycleConditions is True.
func InLifecycle(node *v1.Node) bool {
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Status != v1.ConditionTrue {
			continue
		}
		for _, t := range LifecycleConditions {
			if c.Type == t {
				return true
			}
		}
	}
	return false
}

// Fate is what maintenance under way will do to a node: whether a pod placed there now stays
// or is evicted again before the maintenance ends.
type Fate uint8

const (
	// Stays: no maintenance under way will drain the node (as far as its fields say).
	Stays Fate = iota
	// Surge: a surge node of its pool's upgrade. AKS drains and deletes the surge nodes
	// together at the upgrade's end, so their pods move again, all at once. Karpenter's nodes
	// (KarpenterNodePoolLabel) are never surge nodes: its replacements stay.
	Surge
	// Leaving: the node will be drained: an older generation than its pool's newest while the
	// pool upgrades, cordoned, marked for removal by cluster-autoscaler or Karpenter, or with a
	// lifecycle condition True (LifecycleConditions).
	Leaving
)

func (f Fate) String() string {
	switch f {
	case Stays:
		return "stays"
	case Surge:
		return "surge"
	default:
		return "leaving"
	}
}

// Generation is what a node runs: its kubelet version, then its node image. An upgrade moves a
// pool to a newer generation node by node. One pool may run several flavours of one image side
// by side (a NAP or Karpenter NodePool mixing amd64 and arm64 instance types, or Hyper-V
// generations 1 and 2: AKSUbuntu-2204gen2containerd and AKSUbuntu-2204gen2arm64containerd); an
// image is older only than a newer image of its own flavour, so such a pool is not upgrading.
type Generation struct {
	Kubelet string
	Flavour Flavour
	// Image is the image's version (202410.27.0-2024.12.01), or the whole label when it has no
	// version part that splitImage recognises.
	Image string
}

// Flavour is what a node image is built for: the image's name without its version
// (AKSUbuntu-2204gen2arm64containerd) and the node's architecture (kubernetes.io/arch).
type Flavour struct {
	Name string
	Arch string
}

// GenerationOf returns the node's generation. It does not allocate.
func GenerationOf(node *v1.Node) Generation {
	name, image := splitImage(node.Labels[NodeImageVersionLabel])
	return Generation{Kubelet: node.Status.NodeInfo.KubeletVersion, Flavour: Flavour{Name: name, Arch: node.Labels[v1.LabelArchStable]}, Image: image}
}

// splitImage splits an AKS node image label into its name and its version: the version starts at
// the first dash-separated part that is a digit run followed by a dot (AKSUbuntu-2204gen2containerd
// | 202410.27.0-2024.12.01; AKSWindows-2022-containerd | 20348.2762.241009; AzureLinux-V2gen2 |
// 202410.27.0). A label without one is all version (no name), as before flavours were told apart.
func splitImage(label string) (name, image string) {
	for i := 0; i < len(label); {
		j := i + digitRun(label[i:])
		if j > i && j < len(label) && label[j] == '.' {
			if i == 0 {
				return "", label
			}
			return label[:i-1], label[i:]
		}
		k := strings.IndexByte(label[i:], '-')
		if k < 0 {
			break
		}
		i += k + 1
	}
	return "", label
}

// Compare orders generations: the kubelet version (semantically; unparsable versions sort
// before parsable ones, then as text), then the node image's version (as text with digit runs
// compared as numbers, so AKS image dates such as 202410.27.0 order by date). Images of two
// flavours are compared by version alone: a pool orders them only within a flavour.
func (g Generation) Compare(o Generation) int {
	if c := compareVersions(g.Kubelet, o.Kubelet); c != 0 {
		return c
	}
	return compareNatural(g.Image, o.Image)
}

func compareVersions(a, b string) int {
	if a == b {
		return 0
	}
	va, ea := version.ParseGeneric(a)
	vb, eb := version.ParseGeneric(b)
	switch {
	case ea == nil && eb == nil:
		switch {
		case va.LessThan(vb):
			return -1
		case vb.LessThan(va):
			return 1
		}
		return compareNatural(a, b)
	case ea == nil:
		return 1
	case eb == nil:
		return -1
	}
	return compareNatural(a, b)
}

// compareNatural compares strings with runs of digits compared by value.
func compareNatural(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MarkedForRemoval reports whether the node is cordoned or carries a taint that says an
// autoscaler is removing it (or will, for cluster-autoscaler's deletion candidates).
func MarkedForRemoval(node *v1.Node) bool {
	if node.Spec.Unschedulable {
		return true
	}
	for i := range node.Spec.Taints {
		switch node.Spec.Taints[i].Key {
		case TaintToBeDeleted, TaintDeletionCandidate, TaintKarpenterDisrupted:
			return true
		}
	}
	return false
}

// Rollouts follows every pool's generations, fed node events (an informer's handler), and
// answers FateOf for a node from an immutable view. A pool upgrades while its nodes run more
// than one generation: then the older generations' nodes are Leaving, and a newest-generation
// node is a surge node unless it is a reimaged one. AKS reimages a node under the same name,
// probably deleting and registering its Node object again (docs/maintenance.md), so no field
// tells the two apart: Rollouts remembers the names it saw on an older generation while the
// pool upgrades (a reimaged node's), and, for nodes it did not see (it started mid-upgrade),
// takes a node created after every older-generation node for a surge node, which is right
// where Node objects survive reimages and otherwise only forgoes the preference.
//
// Updates cost O(1) unless a node changes generation, joins or leaves; a node's status
// heartbeats do not republish the view.
type Rollouts struct {
	id pool.Identity

	mu    sync.Mutex
	nodes map[string]nodeRecord
	pools map[string]*poolGenerations
	// inLifecycle are the nodes, in a pool or not, with a lifecycle condition True.
	inLifecycle map[string]bool
	view        atomic.Pointer[RolloutView]
	epoch       uint64
}

type nodeRecord struct {
	pool    string
	gen     Generation
	created time.Time
}

type poolGenerations struct {
	count   map[Generation]int
	members map[string]nodeRecord
	// seenOld are the names seen on an older generation during the pool's upgrade; kept across
	// a node's deletion (a reimage may re-register it), dropped when the upgrade ends.
	seenOld map[string]bool
}

// RolloutView is the pools' upgrade state at one moment. The zero view (and a nil one) has no
// upgrade under way.
type RolloutView struct {
	// Epoch changes whenever the view does, so per-node results can be memoised against it.
	Epoch    uint64
	upgrades map[string]poolUpgrade
	// inLifecycle is Rollouts.inLifecycle when the view was built (a copy: read-only).
	inLifecycle map[string]bool
}

type poolUpgrade struct {
	// newestKubelet is the pool's newest kubelet version, newestImage each flavour's newest
	// image version: a node older in either is Leaving.
	newestKubelet string
	newestImage   map[Flavour]string
	// lastOld is the creation time of the newest node of an older generation: newest-generation
	// nodes created later, and not seen on an older generation, are surge nodes.
	lastOld time.Time
	// seenOld is the pool's poolGenerations.seenOld when the view was built (shared, read-only:
	// a view is republished with a new map whenever it grows).
	seenOld map[string]bool
}

// NewRollouts returns an empty tracker reading pools with id.
func NewRollouts(id pool.Identity) *Rollouts {
	r := &Rollouts{id: id, nodes: map[string]nodeRecord{}, pools: map[string]*poolGenerations{}, inLifecycle: map[string]bool{}}
	r.view.Store(&RolloutView{})
	return r
}

// View returns the current view.
func (r *Rollouts) View() *RolloutView { return r.view.Load() }

// Upsert records a node added or updated.
func (r *Rollouts) Upsert(node *v1.Node) {
	pool, ok := r.id.PoolOf(node.Labels)
	rec := nodeRecord{pool: pool, gen: GenerationOf(node), created: node.CreationTimestamp.Time}
	lifecycle := InLifecycle(node)
	r.mu.Lock()
	defer r.mu.Unlock()
	marksChanged := lifecycle != r.inLifecycle[node.Name]
	if marksChanged {
		r.setLifecycle(node.Name, lifecycle)
	}
	old, had := r.nodes[node.Name]
	if had && old.pool == rec.pool && old.gen == rec.gen && old.created.Equal(rec.created) {
		if marksChanged {
			r.publish()
		}
		return
	}
	if had {
		r.remove(node.Name, old)
	}
	if ok {
		r.nodes[node.Name] = rec
		p := r.pools[pool]
		if p == nil {
			p = &poolGenerations{count: map[Generation]int{}, members: map[string]nodeRecord{}, seenOld: map[string]bool{}}
			r.pools[pool] = p
		}
		p.count[rec.gen]++
		p.members[node.Name] = rec
	}
	r.publish()
}

// Delete records a node removed.
func (r *Rollouts) Delete(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	marked := r.inLifecycle[name]
	if marked {
		r.setLifecycle(name, false)
	}
	old, had := r.nodes[name]
	if had {
		r.remove(name, old)
	}
	if had || marked {
		r.publish()
	}
}

// setLifecycle records whether the node has a lifecycle condition True, in a new map: views
// already published keep theirs unchanged. Few nodes carry one at a time.
func (r *Rollouts) setLifecycle(name string, on bool) {
	next := make(map[string]bool, len(r.inLifecycle)+1)
	for n := range r.inLifecycle {
		next[n] = true
	}
	if on {
		next[name] = true
	} else {
		delete(next, name)
	}
	r.inLifecycle = next
}

func (r *Rollouts) remove(name string, rec nodeRecord) {
	delete(r.nodes, name)
	p := r.pools[rec.pool]
	if p == nil {
		return
	}
	if p.count[rec.gen]--; p.count[rec.gen] <= 0 {
		delete(p.count, rec.gen)
	}
	delete(p.members, name)
	if len(p.members) == 0 && len(p.seenOld) == 0 {
		delete(r.pools, rec.pool)
	}
}

// publish rebuilds the view when a pool's upgrade state changed. Only pools with more than one
// generation are walked.
func (r *Rollouts) publish() {
	upgrades := map[string]poolUpgrade{}
	changed := false
	for name, p := range r.pools {
		if len(p.count) < 2 {
			// One generation (or none): no upgrade, nothing to remember.
			if len(p.seenOld) > 0 {
				p.seenOld, changed = map[string]bool{}, true
			}
			if len(p.members) == 0 {
				delete(r.pools, name)
			}
			continue
		}
		u, upgrading := upgradeOf(p.count)
		if !upgrading {
			// Several flavours, each of one generation: no upgrade either.
			if len(p.seenOld) > 0 {
				p.seenOld, changed = map[string]bool{}, true
			}
			continue
		}
		grown := false
		for n, m := range p.members {
			if u.isNewest(m.gen) {
				continue
			}
			if m.created.After(u.lastOld) {
				u.lastOld = m.created
			}
			if !p.seenOld[n] {
				grown = true
			}
		}
		if grown {
			// A new map, so views already published keep theirs unchanged.
			seen := make(map[string]bool, len(p.seenOld)+1)
			for n := range p.seenOld {
				seen[n] = true
			}
			for n, m := range p.members {
				if !u.isNewest(m.gen) {
					seen[n] = true
				}
			}
			p.seenOld, changed = seen, true
		}
		u.seenOld = p.seenOld
		upgrades[name] = u
	}
	cur := r.view.Load()
	if !maps.Equal(cur.inLifecycle, r.inLifecycle) {
		changed = true
	}
	if !changed && len(upgrades) == len(cur.upgrades) {
		same := true
		for k, u := range upgrades {
			if cu, ok := cur.upgrades[k]; !ok || !cu.sameNewest(u) || !cu.lastOld.Equal(u.lastOld) {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	r.epoch++
	r.view.Store(&RolloutView{Epoch: r.epoch, upgrades: upgrades, inLifecycle: r.inLifecycle})
}

// upgradeOf finds a pool's newest kubelet and each flavour's newest image among its generations,
// and whether the pool upgrades: more than one kubelet version, or more than one image version of
// one flavour.
func upgradeOf(count map[Generation]int) (poolUpgrade, bool) {
	u := poolUpgrade{newestImage: map[Flavour]string{}}
	kubelets := map[string]bool{}
	images := map[Flavour]int{}
	for g := range count {
		if len(kubelets) == 0 || compareVersions(g.Kubelet, u.newestKubelet) > 0 {
			u.newestKubelet = g.Kubelet
		}
		kubelets[g.Kubelet] = true
		if cur, ok := u.newestImage[g.Flavour]; !ok || compareNatural(g.Image, cur) > 0 {
			u.newestImage[g.Flavour] = g.Image
		}
		images[g.Flavour]++
	}
	upgrading := len(kubelets) > 1
	for f, n := range images {
		if n < 2 {
			continue
		}
		// n generations of one flavour: more than one image version among them?
		for g := range count {
			if g.Flavour == f && g.Image != u.newestImage[f] {
				upgrading = true
			}
		}
	}
	return u, upgrading
}

// isNewest reports whether g is the pool's newest kubelet and its flavour's newest image.
func (u poolUpgrade) isNewest(g Generation) bool {
	return g.Kubelet == u.newestKubelet && g.Image == u.newestImage[g.Flavour]
}

func (u poolUpgrade) sameNewest(o poolUpgrade) bool {
	if u.newestKubelet != o.newestKubelet || len(u.newestImage) != len(o.newestImage) {
		return false
	}
	for f, img := range u.newestImage {
		if oi, ok := o.newestImage[f]; !ok || oi != img {
			return false
		}
	}
	return true
}

// Upgrading reports whether any pool is upgrading.
func (v *RolloutView) Upgrading() bool { return v != nil && len(v.upgrades) > 0 }

// InLifecycle reports whether any node has a lifecycle condition True (LifecycleConditions):
// FateOf then reads more than the node's taints.
func (v *RolloutView) InLifecycle() bool { return v != nil && len(v.inLifecycle) > 0 }

// UpgradingPools lists the pools upgrading, unordered.
func (v *RolloutView) UpgradingPools() []string {
	if v == nil {
		return nil
	}
	out := make([]string, 0, len(v.upgrades))
	for p := range v.upgrades {
		out = append(out, p)
	}
	return out
}

// FateOf says what the maintenance under way will do to node, read with id. It does not
// allocate.
func (v *RolloutView) FateOf(id pool.Identity, node *v1.Node) Fate {
	if MarkedForRemoval(node) || v.InLifecycle() && v.inLifecycle[node.Name] {
		return Leaving
	}
	if v == nil || len(v.upgrades) == 0 {
		return Stays
	}
	pool, ok := id.PoolOf(node.Labels)
	if !ok {
		return Stays
	}
	u, ok := v.upgrades[pool]
	if !ok {
		return Stays
	}
	if !u.isNewest(GenerationOf(node)) {
		return Leaving
	}
	if _, karpenter := node.Labels[KarpenterNodePoolLabel]; !karpenter && !u.seenOld[node.Name] && node.CreationTimestamp.Time.After(u.lastOld) {
		return Surge
	}
	return Stays
}

// FatesOf classifies a list of nodes at once (tools, reports): the same rules as Rollouts.
func FatesOf(id pool.Identity, nodes []*v1.Node) map[string]Fate {
	r := NewRollouts(id)
	for _, n := range nodes {
		r.Upsert(n)
	}
	view := r.View()
	out := make(map[string]Fate, len(nodes))
	for _, n := range nodes {
		out[n.Name] = view.FateOf(id, n)
	}
	return out
}
