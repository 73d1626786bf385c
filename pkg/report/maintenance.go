package report

import (
	"fmt"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// DefaultMaxSurge is AKS's default upgrade surge for Kubernetes 1.32 and later: 10% of the pool,
// rounded up (docs/maintenance.md). An upgrade drains that many old nodes at once.
var DefaultMaxSurge = intstr.FromString("10%")

// Floor is the fewest Ready replicas maintenance should leave a workload of r replicas:
// two thirds, rounded up.
func Floor(r int) int { return (2*r + 2) / 3 }

// BatchSize is how many nodes of a pool of n an upgrade with maxSurge drains at once: the
// surge, rounded up and capped at the pool (at least 1).
func BatchSize(maxSurge intstr.IntOrString, n int) int {
	s, err := intstr.GetScaledValueFromIntOrPercent(&maxSurge, n, true)
	if err != nil || s < 1 {
		s = 1
	}
	return min(s, max(n, 1))
}

// MaintenanceRisks returns the workloads of 3 or more replicas that maintenance can take below
// their floor (Floor) at once, or whose PodDisruptionBudgets stop a drain:
//   - a PDB that allows no eviction, or more than one PDB for a pod (the Eviction API refuses
//     those pods outright): an AKS drain then fails after its drainTimeout;
//   - no PDB holding the floor, and an upgrade batch (BatchSize nodes of a pool, drained together,
//     in an order AKS does not publish) can hold more replicas than the floor allows to lose;
//   - during an upgrade, more replicas on the pool's surge nodes than that: AKS drains them all
//     together at the upgrade's end.
//
// pdbs nil means they were not read: only the batch and surge risks are judged, as if no PDB.
func MaintenanceRisks(id pool.Identity, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget, maxSurge intstr.IntOrString) []Finding {
	byName := make(map[string]*v1.Node, len(nodes))
	poolSize := map[string]int{}
	for _, n := range nodes {
		byName[n.Name] = n
		if p, ok := id.PoolOf(n.Labels); ok {
			poolSize[p]++
		}
	}
	fates := maintenance.FatesOf(id, nodes)
	type group struct {
		name   string
		sample *v1.Pod
		// perNode counts replicas per node, per pool.
		perNode map[string]map[string]int
		onSurge int
		total   int
	}
	groups := map[string]*group{}
	var keys []string
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		node := byName[p.Spec.NodeName]
		if ref == nil || pool.IsDaemonSetPod(p) || p.DeletionTimestamp != nil || node == nil {
			continue
		}
		key := string(ref.UID)
		g := groups[key]
		if g == nil {
			g = &group{name: workloadName(p, ref), sample: p, perNode: map[string]map[string]int{}}
			groups[key] = g
			keys = append(keys, key)
		}
		g.total++
		pl, _ := id.PoolOf(node.Labels)
		if g.perNode[pl] == nil {
			g.perNode[pl] = map[string]int{}
		}
		g.perNode[pl][node.Name]++
		if fates[node.Name] == maintenance.Surge {
			g.onSurge++
		}
	}
	var out []Finding
	for _, key := range keys {
		g := groups[key]
		if g.total < 3 {
			continue
		}
		canLose := g.total - Floor(g.total)
		allowed, matching := pdbAllowance(pdbs, g.sample, g.total)
		switch {
		case matching > 1:
			out = append(out, Finding{Object: g.name, Detail: fmt.Sprintf("%d PodDisruptionBudgets select its pods: the Eviction API refuses to evict them, so every drain of their nodes fails", matching),
				Fix: "keep one PodDisruptionBudget per pod"})
			continue
		case matching == 1 && allowed <= 0:
			out = append(out, Finding{Object: g.name, Detail: fmt.Sprintf("its PodDisruptionBudget allows no eviction of its %d replicas: an upgrade's drain of their nodes is refused until drainTimeout (AKS: 30 min), then the upgrade fails or quarantines the node", g.total),
				Fix: "allow at least one disruption (maxUnavailable: 1)"})
			continue
		case matching == 1 && allowed <= canLose:
			continue // the budget holds the floor; drains wait for it
		}
		// The worst batch: the BatchSize nodes of one pool holding the most replicas.
		worst, worstPool := 0, ""
		for pl, counts := range g.perNode {
			c := make([]int, 0, len(counts))
			for _, n := range counts {
				c = append(c, n)
			}
			sort.Sort(sort.Reverse(sort.IntSlice(c)))
			take := 0
			for i := 0; i < len(c) && i < BatchSize(maxSurge, poolSize[pl]); i++ {
				take += c[i]
			}
			if take > worst {
				worst, worstPool = take, pl
			}
		}
		budget := "no PodDisruptionBudget"
		if matching == 1 {
			budget = fmt.Sprintf("its PodDisruptionBudget allows %d", allowed)
		}
		if g.onSurge > canLose {
			out = append(out, Finding{Object: g.name, Detail: fmt.Sprintf("%d of %d replicas on surge nodes, drained together when the upgrade under way ends; %s, floor %d", g.onSurge, g.total, budget, Floor(g.total)),
				Fix: "add a PodDisruptionBudget with maxUnavailable " + fmt.Sprint(max(canLose, 1))})
			continue
		}
		if worst > canLose {
			out = append(out, Finding{Object: g.name, Detail: fmt.Sprintf("an upgrade batch (%d nodes of pool %q, drained at once) can take %d of %d replicas; %s, floor %d", BatchSize(maxSurge, poolSize[worstPool]), worstPool, worst, g.total, budget, Floor(g.total)),
				Fix: "add a PodDisruptionBudget with maxUnavailable " + fmt.Sprint(max(canLose, 1))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out
}

// pdbAllowance returns how many of a workload's r replicas its PodDisruptionBudget lets go at
// once (the smallest over the matching budgets) and how many budgets select its pods.
func pdbAllowance(pdbs []*policyv1.PodDisruptionBudget, pod *v1.Pod, r int) (allowed, matching int) {
	allowed = math.MaxInt
	for _, b := range pdbs {
		// policy/v1: a null selector selects no pod, an empty one every pod of the namespace.
		if b.Namespace != pod.Namespace || b.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matching++
		a := r
		switch {
		case b.Spec.MaxUnavailable != nil:
			if v, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, r, true); err == nil {
				a = v
			}
		case b.Spec.MinAvailable != nil:
			if v, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, r, true); err == nil {
				a = r - v
			}
		}
		allowed = min(allowed, a)
	}
	if matching == 0 {
		allowed = r
	}
	return allowed, matching
}
