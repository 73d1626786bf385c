package domainspread

import (
	"context"
	"math"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/taints"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// domainKey identifies a domain of one dimension: slot d holds the dimension's value, and a joint
// dimension also fills the slots of the previous dimensions. Fixed size, so building and looking
// one up does not allocate.
type domainKey [validation.MaxSpreadDimensions]string

type dimension struct {
	name  string
	keys  []string
	joint bool
}

// domainKeyOf returns the node's domain in dimension d; false if the node lacks the dimension's
// keys (or, for a joint dimension, a previous dimension's keys).
func (pl *DomainSpread) domainKeyOf(d int, labels map[string]string) (domainKey, bool) {
	var key domainKey
	v, ok := pool.FirstPresentLabel(pl.dims[d].keys, labels)
	if !ok {
		return key, false
	}
	key[d] = v
	if pl.dims[d].joint {
		for p := 0; p < d; p++ {
			if key[p], ok = pool.FirstPresentLabel(pl.dims[p].keys, labels); !ok {
				return key, false
			}
		}
	}
	return key, true
}

// workload is the pods of one controller (one revision of a Deployment is its ReplicaSet, so
// old-revision pods still running during a rollout do not skew the new one).
type workload struct {
	namespace string
	uid       types.UID
}

// workloadOf returns the workload pod is a replica of: its controller, in its namespace; false
// for a pod without a controller.
func workloadOf(pod *v1.Pod) (workload, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return workload{}, false
	}
	return workload{namespace: pod.Namespace, uid: ref.UID}, true
}

// workloadToSpread returns the pod's workload, or false when the plugin leaves the pod alone:
// no controller, a DaemonSet (one pod per node by construction), or its own spread constraints
// (left to PodTopologySpread unless configured otherwise).
func (pl *DomainSpread) workloadToSpread(pod *v1.Pod) (workload, bool) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 && !pl.spreadPodsWithConstraints {
		return workload{}, false
	}
	if pool.IsDaemonSetPod(pod) {
		return workload{}, false
	}
	return workloadOf(pod)
}

// isReplica reports whether pod is a replica of w that counts: terminating ones do not, their
// replacements are already being scheduled.
func (w workload) isReplica(pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	of, ok := workloadOf(pod)
	return ok && of == w
}

// nodeDomains are a node's domain IDs, one per dimension (noDomain where it lacks the keys).
type nodeDomains [validation.MaxSpreadDimensions]int32

const noDomain int32 = -1

// ineligible marks, in Hard mode's counts, a domain the pod may not use.
const ineligible int32 = math.MinInt32

// domainTable interns each dimension's domains as small integers, so that a cycle's counts are
// slices indexed by ID: no label lookups or key hashing per node once a node version is known.
// IDs are assigned as the node handler sees a node join or change, or when a node version is
// first resolved (under mu, off the hot path), and stay valid until reset, which only happens at
// the start of a cycle.
type domainTable struct {
	mu    sync.Mutex
	epoch uint64
	ids   [validation.MaxSpreadDimensions]map[domainKey]int32
	keys  [validation.MaxSpreadDimensions][]domainKey
}

func (t *domainTable) intern(d int, key domainKey) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids[d] == nil {
		t.ids[d] = map[domainKey]int32{}
	}
	id, ok := t.ids[d][key]
	if !ok {
		id = int32(len(t.keys[d]))
		t.ids[d][key] = id
		t.keys[d] = append(t.keys[d], key)
	}
	return id
}

// value is the label value of domain id of dimension d, for logs.
func (t *domainTable) value(d int, id int32) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id < 0 || int(id) >= len(t.keys[d]) {
		return ""
	}
	return t.keys[d][id][d]
}

// len is the number of domains of dimension d known so far.
func (t *domainTable) len(d int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys[d])
}

// currentEpoch returns the epoch node IDs are remembered under, first starting a new one if the
// table holds far more domains than the cluster has nodes (hosts that left, values relabelled):
// IDs then restart from 0 and every node is resolved again once (renumbered is true). Called at
// the start of a cycle.
func (t *domainTable) currentEpoch(liveNodes int) (epoch uint64, renumbered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for d := range t.keys {
		if len(t.keys[d]) > 2*liveNodes+64 {
			t.epoch++
			t.ids = [validation.MaxSpreadDimensions]map[domainKey]int32{}
			t.keys = [validation.MaxSpreadDimensions][]domainKey{}
			return t.epoch, true
		}
	}
	return t.epoch, false
}

// resolve computes a node's domain IDs (the nodememo.Memo's function).
func (pl *DomainSpread) resolve(node *v1.Node, _ uint64) nodeDomains {
	var out nodeDomains
	for d := range out {
		out[d] = noDomain
	}
	for d := range pl.dims {
		if key, ok := pl.domainKeyOf(d, node.Labels); ok {
			out[d] = pl.domains.intern(d, key)
		}
	}
	return out
}

// numberDomains gives the node's domains their IDs (if new) as the node joins or changes, so
// that the domains known (the update domains scoring's cell diagonals count) include the node's
// before a cycle normally scores it: no cycle has to look up every node it scores first (a node
// the snapshot holds before this handler ran is covered by diagonalFill).
func (pl *DomainSpread) numberDomains(node *v1.Node) {
	for d := range pl.dims {
		if key, ok := pl.domainKeyOf(d, node.Labels); ok {
			pl.domains.intern(d, key)
		}
	}
}

// domainIDs returns the node's domain IDs, resolved once per node version and epoch.
func (pl *DomainSpread) domainIDs(node *v1.Node, epoch uint64) nodeDomains {
	return pl.nodeDomains.Get(node, epoch)
}

// spreadState is computed once per cycle and read by Filter and Score.
type spreadState struct {
	workload workload
	epoch    uint64
	// perDomain[d][id] is the workload's replicas in domain id of dimension d; IDs past the end
	// have none. In Hard mode, domains the pod may not use hold ineligible, and minimum[d] is
	// the replicas of the least loaded eligible domain.
	perDomain [validation.MaxSpreadDimensions][]int32
	// few[d][:nFew[d]] holds them instead in Soft mode while perDomain[d] is nil: as long as
	// the replicas are in at most fewDomains domains of the dimension (most workloads' hosts),
	// a cycle allocates no slice as long as the highest ID among them (up to the cluster's hosts).
	few     [validation.MaxSpreadDimensions][fewDomains]domainCount
	nFew    [validation.MaxSpreadDimensions]int
	minimum [validation.MaxSpreadDimensions]int32
	// counted is the replicas counted on the snapshot's nodes: with none, every node scores alike.
	counted int32
}

// fewDomains bounds spreadState.few: a linear scan of this many beats a cache miss in Score.
const fewDomains = 8

type domainCount struct{ id, replicas int32 }

// inDomain is the workload's replicas in domain id of dimension d.
func (s *spreadState) inDomain(d int, id int32) int32 {
	if s.perDomain[d] == nil {
		for _, c := range s.few[d][:s.nFew[d]] {
			if c.id == id {
				return c.replicas
			}
		}
		return 0
	}
	if id < 0 || int(id) >= len(s.perDomain[d]) {
		return 0
	}
	return max(s.perDomain[d][id], 0)
}

// Clone copies the replica counts: preemption's AddPod/RemovePod change them on the copy.
func (s *spreadState) Clone() fwk.StateData {
	c := *s
	for d, replicas := range s.perDomain {
		c.perDomain[d] = slices.Clone(replicas)
	}
	return &c
}

// countReplicas builds the state for pod's workload: its replicas per domain, from the replica
// index and the snapshot's nodes. With eligibleDomains (Hard mode), every domain of a node the
// pod may use is recorded, empty ones included, and only replicas on such nodes count. A node
// the pod may use matches its required node affinity, is not cordoned and has no
// NoSchedule/NoExecute taint the pod does not tolerate (PodTopologySpread's nodeTaintsPolicy:
// Honor): an empty domain the pod can never reach must not hold it back.
func (pl *DomainSpread) countReplicas(ctx context.Context, pod *v1.Pod, w workload, eligibleDomains bool) (*spreadState, error) {
	if err := pl.replicas.waitForSync(ctx); err != nil {
		return nil, err
	}
	nodeInfos := pl.sharedLister.NodeInfos()
	nodes, err := nodeInfos.List()
	if err != nil {
		return nil, err
	}
	epoch, renumbered := pl.domains.currentEpoch(len(nodes))
	s := &spreadState{workload: w, epoch: epoch}
	pl.nodeDomains.Compact(nodeInfos)
	if renumbered {
		// The IDs restarted: number every node's domains again now (O(nodes), as rare as the
		// table's overflow), as the node handler did when they joined.
		for _, ni := range nodes {
			pl.domainIDs(ni.Node(), epoch)
		}
	}

	// Soft mode starts from empty counts: a dimension's domains that hold replicas go in fixed
	// slots (spreadState.few), a slice by ID only past fewDomains of them.
	empty := int32(0)
	if eligibleDomains {
		empty = ineligible
		for d := range pl.dims {
			s.perDomain[d] = filled(pl.domains.len(d), empty)
		}
	}
	var affinity nodeaffinity.RequiredNodeAffinity
	if eligibleDomains {
		affinity = nodeaffinity.GetRequiredNodeAffinity(pod)
		for _, ni := range nodes {
			if node := ni.Node(); eligible(pod, affinity, node) {
				pl.addReplicas(s, pl.domainIDs(node, s.epoch), 0, empty)
			}
		}
	}
	pl.replicas.each(w, func(nodeName string, replicas int32) {
		ni, err := nodeInfos.Get(nodeName)
		if err != nil || ni.Node() == nil {
			// The node left, or the snapshot does not have it yet: like its pods.
			return
		}
		node := ni.Node()
		if eligibleDomains && !eligible(pod, affinity, node) {
			return
		}
		pl.addReplicas(s, pl.domainIDs(node, s.epoch), replicas, empty)
	})
	if eligibleDomains {
		s.updateMinimum(len(pl.dims))
	}
	return s, nil
}

// addReplicas adds replicas to the node's domain of every dimension, recording the domain
// (empty is what an unrecorded domain holds).
func (pl *DomainSpread) addReplicas(s *spreadState, ids nodeDomains, replicas, empty int32) {
	for d := range pl.dims {
		id := ids[d]
		if id == noDomain {
			continue
		}
		if s.perDomain[d] == nil && s.addFew(d, id, replicas) {
			continue
		}
		if int(id) >= len(s.perDomain[d]) {
			// A domain first seen in this cycle.
			s.perDomain[d] = append(s.perDomain[d], filled(int(id)+1-len(s.perDomain[d]), empty)...)
		}
		s.perDomain[d][id] = max(s.perDomain[d][id], 0) + replicas
	}
	s.counted += replicas
}

// addFew adds replicas to domain id of dimension d in few; false once the domains are too
// many, when it has moved them to perDomain[d] for the caller to add to.
func (s *spreadState) addFew(d int, id, replicas int32) bool {
	few := s.few[d][:s.nFew[d]]
	for i := range few {
		if few[i].id == id {
			few[i].replicas += replicas
			return true
		}
	}
	if s.nFew[d] < fewDomains {
		s.few[d][s.nFew[d]] = domainCount{id: id, replicas: replicas}
		s.nFew[d]++
		return true
	}
	highest := id
	for _, c := range few {
		highest = max(highest, c.id)
	}
	s.perDomain[d] = make([]int32, highest+1)
	for _, c := range few {
		s.perDomain[d][c.id] = c.replicas
	}
	s.nFew[d] = 0
	return false
}

func filled(n int, v int32) []int32 {
	out := make([]int32, n)
	if v != 0 {
		for i := range out {
			out[i] = v
		}
	}
	return out
}

func (s *spreadState) updateMinimum(dims int) {
	for d := 0; d < dims; d++ {
		first := true
		for _, c := range s.perDomain[d] {
			if c != ineligible && (first || c < s.minimum[d]) {
				s.minimum[d], first = c, false
			}
		}
	}
}

func eligible(pod *v1.Pod, affinity nodeaffinity.RequiredNodeAffinity, node *v1.Node) bool {
	if match, _ := affinity.Match(node); !match || node.Spec.Unschedulable {
		return false
	}
	_, untolerated := taints.FindMatchingUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	})
	return !untolerated
}
