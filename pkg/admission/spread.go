package admission

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

// Workload label keys: the label a controller puts on every pod of one revision (one
// ReplicaSet, one StatefulSet revision, one Job), which DomainSpread's workload (the controller
// owner reference) becomes for PodTopologySpread's label selector.
var workloadKeys = []struct{ group, kind, label string }{
	{"apps", "ReplicaSet", "pod-template-hash"},
	{"apps", "StatefulSet", "controller-revision-hash"},
	{"batch", "Job", "batch.kubernetes.io/controller-uid"},
}

// everyNodeKeys are the node labels kubelet or the cloud provider put on every node.
// PodTopologySpread scores a pod with constraints of its own only on nodes that carry every
// constraint's key (the others all score 0): one constraint over a key some nodes lack (the
// update domain, written by pool-labeler's domain mode on Azure VMs only) would switch the
// spread off on those nodes, or on all of them.
var everyNodeKeys = sets.New(v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyRegion)

// DegradedSpread returns the topology spread constraints a pod gets while it keeps the default
// scheduler (no healthy pool-scheduler): one per DomainSpread dimension whose first label key is
// on every node (everyNodeKeys; the others are lost in degraded mode), without the workload's
// selector (addSpread adds it). ScheduleAnyway in both modes: PodTopologySpread's DoNotSchedule
// refuses every node lacking the key, which DomainSpread does not (unless
// rejectNodesMissingKeys), so a Hard profile's filter is not kept in degraded mode. Callers pass
// args only where the profile enables DomainSpread (profile.Enabled); nil args: none.
func DegradedSpread(args *config.DomainSpreadArgs) []v1.TopologySpreadConstraint {
	if args == nil {
		return nil
	}
	skew := max(args.MaxSkew, 1)
	var out []v1.TopologySpreadConstraint
	for _, d := range args.Dimensions {
		if len(d.LabelKeys) == 0 || !everyNodeKeys.Has(d.LabelKeys[0]) {
			continue
		}
		out = append(out, v1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: d.LabelKeys[0], WhenUnsatisfiable: v1.ScheduleAnyway})
	}
	return out
}

// workloadKey is the label key naming pod's workload (its controller's revision), "" for pods
// DomainSpread does not spread (no controller of a known kind, or the label is missing).
func workloadKey(pod *v1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return ""
	}
	group, _, _ := strings.Cut(ref.APIVersion, "/")
	for _, w := range workloadKeys {
		if w.group == group && w.kind == ref.Kind {
			if _, ok := pod.Labels[w.label]; ok {
				return w.label
			}
		}
	}
	return ""
}

// addSpread gives pod the degraded spread over its workload, unless it has constraints of its
// own (DomainSpread leaves those to PodTopologySpread too) or no workload.
func addSpread(pod *v1.Pod, spread []v1.TopologySpreadConstraint) bool {
	if len(spread) == 0 || len(pod.Spec.TopologySpreadConstraints) > 0 {
		return false
	}
	key := workloadKey(pod)
	if key == "" {
		return false
	}
	for _, c := range spread {
		// The pod's own value, known at admission: what matchLabelKeys would merge in, without
		// depending on its feature gate.
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{key: pod.Labels[key]}}
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, c)
	}
	return true
}
