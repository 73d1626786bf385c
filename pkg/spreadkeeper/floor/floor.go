// Package floor keeps a PodDisruptionBudget for each workload without one, so that no batch of
// an upgrade or a consolidation takes a workload below two thirds of its replicas Ready
// (docs/maintenance.md, "A floor for workloads without a budget"). It is off by default and
// opt-in per namespace; it steps aside for a budget of the user's own and for the
// eviction-autoscaler.
package floor

import (
	"fmt"
	"hash/fnv"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// NamespaceLabel opts a namespace in: "true" gives its workloads of MinReplicas or more a
	// budget each (those without one).
	NamespaceLabel = "pool-scheduler.io/budget-floor"
	// Annotation "false" on a Deployment or StatefulSet keeps the floor off it.
	Annotation = "pool-scheduler.io/budget-floor"
	// ManagedByLabel and ManagedBy mark the budgets the floor keeps: it changes no other, and its
	// admission policy refuses it any other.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "pool-scheduler-budget-floor"
	// EvictionAutoscalerAnnotation "true" on a namespace turns on the eviction-autoscaler there
	// (github.com/Azure/eviction-autoscaler, internal/controller/deployment_to_pdb_controller.go;
	// AKS's automatic PDB management runs it): it keeps its own budget for each Deployment
	// without one, so the floor leaves such a namespace to it rather than race it to a second
	// budget (two budgets over one pod make the Eviction API refuse every eviction of it).
	EvictionAutoscalerAnnotation = "eviction-autoscaler.azure.com/enable-eviction-autoscaler"
	// MinReplicas: smaller workloads get no budget (with 2 replicas, two thirds is both).
	MinReplicas = 3
	// nameSuffix ends the budget's name: <workload>-budget-floor.
	nameSuffix = "-budget-floor"
)

// MinAvailable is the floor's budget for r replicas: ceil(2r/3) Ready, which leaves at least one
// replica to evict from 3 replicas on (r - ceil(2r/3) >= 1), so a drain can always go on.
//
// An integer minAvailable, not maxUnavailable r - ceil(2r/3): with maxUnavailable (or a
// percentage) the disruption controller needs the scale of the controller of every pod the
// selector matches, and one pod of a Job, CronJob or DaemonSet that shares the workload's labels
// (a chart's hook reusing its selector labels) makes it fail safe to 0 disruptions allowed,
// blocking every drain (k8s.io/kubernetes pkg/controller/disruption, getExpectedPodCount and
// failSafe). An integer minAvailable counts the matching pods and needs no scale.
func MinAvailable(r int32) int32 {
	return (2*r + 2) / 3
}

// workload is a Deployment or StatefulSet as the floor reads it.
type workload struct {
	kind     string
	obj      client.Object
	replicas int32
	selector *metav1.LabelSelector
	template labels.Set
}

func fromDeployment(d *appsv1.Deployment) workload {
	return workload{kind: "Deployment", obj: d, replicas: ptr.Deref(d.Spec.Replicas, 1), selector: d.Spec.Selector, template: d.Spec.Template.Labels}
}

func fromStatefulSet(s *appsv1.StatefulSet) workload {
	return workload{kind: "StatefulSet", obj: s, replicas: ptr.Deref(s.Spec.Replicas, 1), selector: s.Spec.Selector, template: s.Spec.Template.Labels}
}

// budgetName is the name of w's budget: <name>-budget-floor, shortened with a hash of the name
// where that would exceed an object name's 253 characters.
func budgetName(name string) string {
	if len(name)+len(nameSuffix) <= 253 {
		return name + nameSuffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%s-%08x%s", name[:253-len(nameSuffix)-9], h.Sum32(), nameSuffix)
}

// Why the floor keeps no budget for a workload (events and the workloads metric).
type reason string

const (
	kept         reason = "kept"
	optedOut     reason = "opted_out"
	tooSmall     reason = "too_few_replicas"
	ownBudget    reason = "own_budget"
	overlap      reason = "overlapping_selector"
	badSelector  reason = "invalid_selector"
	deleting     reason = "deleting"
	nameTaken    reason = "name_taken"
	namespaceOff reason = "namespace_not_opted_in"
	byAutoscaler reason = "eviction_autoscaler"
)

// decide says whether w gets a budget, among the namespace's workloads and the budgets not the
// floor's (foreign).
func decide(w workload, all []workload, foreign []*policyv1.PodDisruptionBudget) reason {
	switch {
	case w.obj.GetDeletionTimestamp() != nil:
		return deleting
	case w.replicas < MinReplicas:
		return tooSmall
	case w.obj.GetAnnotations()[Annotation] == "false":
		return optedOut
	}
	sel, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil || sel.Empty() {
		// An empty selector would budget every pod of the namespace.
		return badSelector
	}
	for _, p := range foreign {
		// policy/v1: a nil selector matches no pod, an empty one every pod (as
		// LabelSelectorAsSelector reads them).
		if ps, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && ps.Matches(w.template) {
			return ownBudget
		}
	}
	for _, o := range all {
		if o.obj.GetUID() != w.obj.GetUID() && sel.Matches(o.template) {
			// The budget would count another workload's pods too (and give them two budgets
			// if that one has its own).
			return overlap
		}
	}
	return kept
}

// desired is w's budget as the floor keeps it.
func desired(w workload) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:      budgetName(w.obj.GetName()),
			Namespace: w.obj.GetNamespace(),
			Labels:    map[string]string{ManagedByLabel: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: appsv1.SchemeGroupVersion.String(), Kind: w.kind, Name: w.obj.GetName(), UID: w.obj.GetUID(), Controller: ptr.To(true),
			}},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:     w.selector.DeepCopy(),
			MinAvailable: ptr.To(intstr.FromInt32(MinAvailable(w.replicas))),
			// A replica that is not Ready can always be evicted: a crash-looping workload never
			// stalls a drain on the floor's budget.
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// ownerOf is the UID of the budget's controlling owner.
func ownerOf(p *policyv1.PodDisruptionBudget) types.UID {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.UID
	}
	return ""
}

// sameSpec reports whether the kept budget p has want's spec.
func sameSpec(p, want *policyv1.PodDisruptionBudget) bool {
	return p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable != nil && *p.Spec.MinAvailable == *want.Spec.MinAvailable &&
		ptr.Equal(p.Spec.UnhealthyPodEvictionPolicy, want.Spec.UnhealthyPodEvictionPolicy) &&
		selectorEqual(p.Spec.Selector, want.Spec.Selector)
}

func selectorEqual(a, b *metav1.LabelSelector) bool {
	sa, err1 := metav1.LabelSelectorAsSelector(a)
	sb, err2 := metav1.LabelSelectorAsSelector(b)
	return err1 == nil && err2 == nil && sa.String() == sb.String()
}
