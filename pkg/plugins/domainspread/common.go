package domainspread

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

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

// firstValue returns the value of the first key of keys present on the node.
func firstValue(keys []string, labels map[string]string) (string, bool) {
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			return v, true
		}
	}
	return "", false
}

// domainOf returns the node's domain in dimension d; false if the node lacks the dimension's keys
// (or, for a joint dimension, a previous dimension's keys).
func (pl *DomainSpread) domainOf(d int, labels map[string]string) (domainKey, bool) {
	var key domainKey
	v, ok := firstValue(pl.dims[d].keys, labels)
	if !ok {
		return key, false
	}
	key[d] = v
	if pl.dims[d].joint {
		for p := 0; p < d; p++ {
			if key[p], ok = firstValue(pl.dims[p].keys, labels); !ok {
				return key, false
			}
		}
	}
	return key, true
}

// group is a workload: the pods of one controller (one revision of a Deployment is its
// ReplicaSet, so old-revision pods still running during a rollout do not skew the new one).
type group struct {
	namespace string
	uid       types.UID
}

// groupOf returns the pod's workload, or false when the plugin has nothing to do with the pod:
// no controller, a DaemonSet (one pod per node by construction), or its own spread constraints
// (left to PodTopologySpread unless configured otherwise).
func (pl *DomainSpread) groupOf(pod *v1.Pod) (group, bool) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 && !pl.spreadPodsWithConstraints {
		return group{}, false
	}
	if pool.IsDaemonSetPod(pod) {
		return group{}, false
	}
	uid, ok := controllerUID(pod)
	if !ok {
		return group{}, false
	}
	return group{namespace: pod.Namespace, uid: uid}, true
}

func controllerUID(pod *v1.Pod) (types.UID, bool) {
	for i := range pod.OwnerReferences {
		if ref := &pod.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			return ref.UID, true
		}
	}
	return "", false
}

// counts pods of g: never terminating ones, whose replacements are already being scheduled.
func (g group) counts(pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Namespace != g.namespace {
		return false
	}
	uid, ok := controllerUID(pod)
	return ok && uid == g.uid
}

// spreadState is computed once per cycle and read by Filter and Score.
type spreadState struct {
	group group
	// counts[d] maps the domains of dimension d to the group's replicas in them. In Hard mode it
	// also holds every eligible domain (with 0), and minimum[d] is the least loaded one.
	counts  [validation.MaxSpreadDimensions]map[domainKey]int32
	minimum [validation.MaxSpreadDimensions]int32
}

// Clone copies the counts: preemption's AddPod/RemovePod change them on the copy.
func (s *spreadState) Clone() fwk.StateData {
	c := &spreadState{group: s.group, minimum: s.minimum}
	for d, m := range s.counts {
		if m == nil {
			continue
		}
		c.counts[d] = make(map[domainKey]int32, len(m))
		for k, v := range m {
			c.counts[d][k] = v
		}
	}
	return c
}

// count builds the state for pod's group from the snapshot. Pods are counted per node in
// parallel into a slice (no locks), then folded into domains. With eligibleDomains (Hard mode),
// every domain of a node the pod may use is recorded, empty ones included, and only pods on such
// nodes count. A node the pod may use matches its required node affinity, is not cordoned and
// has no NoSchedule/NoExecute taint the pod does not tolerate (PodTopologySpread's
// nodeTaintsPolicy: Honor): an empty domain the pod can never reach must not hold it back.
func (pl *DomainSpread) count(ctx context.Context, pod *v1.Pod, g group, eligibleDomains bool) (*spreadState, error) {
	nodes, err := pl.sharedLister.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	perNode := make([]int32, len(nodes))
	pl.parallelizer.Until(ctx, len(nodes), func(i int) {
		var n int32
		for _, pi := range nodes[i].GetPods() {
			if g.counts(pi.GetPod()) {
				n++
			}
		}
		perNode[i] = n
	}, Name)

	s := &spreadState{group: g}
	for d := range pl.dims {
		s.counts[d] = map[domainKey]int32{}
	}
	var affinity nodeaffinity.RequiredNodeAffinity
	if eligibleDomains {
		affinity = nodeaffinity.GetRequiredNodeAffinity(pod)
	}
	for i, ni := range nodes {
		if perNode[i] == 0 && !eligibleDomains {
			continue
		}
		node := ni.Node()
		if eligibleDomains && !eligible(pod, affinity, node) {
			continue
		}
		for d := range pl.dims {
			if key, ok := pl.domainOf(d, node.Labels); ok {
				s.counts[d][key] += perNode[i]
			}
		}
	}
	if eligibleDomains {
		s.updateMinimum(len(pl.dims))
	}
	return s, nil
}

func (s *spreadState) updateMinimum(dims int) {
	for d := 0; d < dims; d++ {
		first := true
		for _, c := range s.counts[d] {
			if first || c < s.minimum[d] {
				s.minimum[d], first = c, false
			}
		}
	}
}

func eligible(pod *v1.Pod, affinity nodeaffinity.RequiredNodeAffinity, node *v1.Node) bool {
	if match, _ := affinity.Match(node); !match || node.Spec.Unschedulable {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	})
	return !untolerated
}
