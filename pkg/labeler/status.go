package labeler

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// The status controller: each NodePoolLabelSet's status (its pool's nodes, which carry the
// labels, which the gate holds and why). The node controller is in controller.go.

// statusChanged passes updates of a NodePoolLabelSet's status.
type statusChanged struct{ predicate.Funcs }

func (statusChanged) Create(event.CreateEvent) bool   { return false }
func (statusChanged) Delete(event.DeleteEvent) bool   { return false }
func (statusChanged) Generic(event.GenericEvent) bool { return false }
func (statusChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*labelsv1alpha1.NodePoolLabelSet)
	n, ok2 := e.ObjectNew.(*labelsv1alpha1.NodePoolLabelSet)
	return ok1 && ok2 && !equalStatus(o.Status, n.Status)
}

// nodeChanged passes node events that can change a set's status: any add or delete, and
// updates of labels or annotations (not the constant status heartbeats).
type nodeChanged struct{ predicate.Funcs }

func (nodeChanged) Create(event.CreateEvent) bool   { return true }
func (nodeChanged) Delete(event.DeleteEvent) bool   { return true }
func (nodeChanged) Generic(event.GenericEvent) bool { return false }
func (nodeChanged) Update(e event.UpdateEvent) bool {
	return predicate.LabelChangedPredicate{}.Update(e) || predicate.AnnotationChangedPredicate{}.Update(e)
}

// reconcileStatus writes how many of the pool's nodes carry the set's labels, how many the
// scheduler's gate accepts, which are held and why, and whether the pool's sets disagree.
func (c *Controller) reconcileStatus(ctx context.Context, req reconcile.Request) (result reconcile.Result, err error) {
	defer func() { recordReconcile("nodepoollabelset", err) }()
	set := &labelsv1alpha1.NodePoolLabelSet{}
	if err := c.client.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			nodesOutOfSync.DeleteLabelValues(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !c.watches(set.Namespace) || set.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	compiled, _, err := c.labelSets(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	desired := compiled.Pool(set.Name)
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, err
	}
	// A copy of the conditions: comparing against the old status must see the old ones.
	// Sorted, so the status message is stable and equal statuses are not re-written.
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	status := labelsv1alpha1.NodePoolLabelSetStatus{ObservedGeneration: set.Generation, Conditions: append([]metav1.Condition(nil), set.Status.Conditions...)}
	recorded := map[string]time.Time{}
	for _, h := range set.Status.HeldNodes {
		recorded[h.Name] = h.Since.Time
	}
	now := c.now()
	var conflicts, problems, held []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if name, ok := c.opts.Gate.Identity.PoolOf(n.Labels); !ok || name != set.Name {
			continue
		}
		status.NodesMatched++
		plan := PlanNodeForGate(&c.opts.Gate, n.Labels, n.Annotations, desired, c.opts.OverwriteConflicts)
		if plan.Empty() && len(plan.Conflicts) == 0 {
			status.NodesInSync++
		}
		for _, cf := range plan.Conflicts {
			conflicts = append(conflicts, fmt.Sprintf("node %s: %s", n.Name, cf))
		}
		v := c.opts.Gate.Check(n.Labels, n.Annotations, compiled)
		since := c.holds.observe(n.Name, v, now, recorded[n.Name])
		if v.Ready() {
			status.NodesReady++
			continue
		}
		status.NodesHeld++
		held = append(held, fmt.Sprintf("%s (%s)", n.Name, v.Detail()))
		if len(status.HeldNodes) < maxHeldNodes {
			status.HeldNodes = append(status.HeldNodes, labelsv1alpha1.HeldNode{
				Name: n.Name, Reason: v.HeldReason(), Key: v.Key, Want: v.Want, Got: v.Got,
				Since: metav1.NewTime(since.Truncate(time.Second)),
			})
		}
	}
	if desired != nil {
		problems = desired.Problems
	}
	switch {
	case len(conflicts) > 0:
		status.State = labelsv1alpha1.SyncStateConflict
		status.Message = summarize(conflicts)
	case len(problems) > 0:
		status.State = labelsv1alpha1.SyncStateError
		status.Message = summarize(problems)
	case status.NodesInSync < status.NodesMatched:
		status.State = labelsv1alpha1.SyncStatePending
		status.Message = fmt.Sprintf("%d of %d nodes carry the labels", status.NodesInSync, status.NodesMatched)
	default:
		status.State = labelsv1alpha1.SyncStateSynced
		status.Message = fmt.Sprintf("all %d nodes carry the labels", status.NodesMatched)
	}
	cond := metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionTrue, Reason: string(status.State), Message: status.Message, ObservedGeneration: set.Generation}
	if status.State != labelsv1alpha1.SyncStateSynced {
		cond.Status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&status.Conditions, cond)

	ready := metav1.Condition{Type: ConditionNodesReady, Status: metav1.ConditionTrue, Reason: "AllNodesReady",
		Message: fmt.Sprintf("pool-scheduler accepts all %d nodes of the pool", status.NodesMatched), ObservedGeneration: set.Generation}
	if status.NodesHeld > 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, "NodesHeld"
		ready.Message = fmt.Sprintf("pool-scheduler keeps pods off %d of %d nodes: %s", status.NodesHeld, status.NodesMatched, summarize(held))
	}
	meta.SetStatusCondition(&status.Conditions, ready)

	source := set.Namespace + "/" + set.Name
	var mine []string
	if desired != nil {
		for _, cf := range desired.Conflicts {
			if slices.Contains(cf.Sources, source) {
				mine = append(mine, cf.Message)
			}
		}
	}
	conflict := metav1.Condition{Type: ConditionLabelSetConflict, Status: metav1.ConditionFalse, Reason: "NoConflict",
		Message: "no other NodePoolLabelSet of the pool disagrees with this one", ObservedGeneration: set.Generation}
	if len(mine) > 0 {
		conflict.Status, conflict.Reason = metav1.ConditionTrue, "ValuesDisagree"
		conflict.Message = summarize(mine) + " (nodes of the pool are used only if they carry one of the values)"
	}
	wasConflict := meta.IsStatusConditionTrue(set.Status.Conditions, ConditionLabelSetConflict)
	meta.SetStatusCondition(&status.Conditions, conflict)

	nodesOutOfSync.WithLabelValues(set.Namespace, set.Name).Set(float64(status.NodesMatched - status.NodesInSync))
	if len(conflicts) > 0 && set.Status.State != labelsv1alpha1.SyncStateConflict {
		c.recorder.Eventf(set, corev1.EventTypeWarning, "LabelConflict", "%s", status.Message)
	}
	if len(mine) > 0 && !wasConflict {
		c.recorder.Eventf(set, corev1.EventTypeWarning, "LabelSetConflict", "%s", conflict.Message)
	}
	var ignored []string
	if desired != nil {
		for _, l := range desired.Ignored {
			if l.Source == source {
				ignored = append(ignored, l.Message)
			}
		}
	}
	if len(ignored) > 0 && (set.Status.State != status.State || set.Status.Message != status.Message || set.Status.ObservedGeneration != set.Generation) {
		// Once per change, as the status says it: the rest of the set is applied, and a node of
		// the pool is judged without these (the admission policy would refuse a write setting
		// one, and with it the set's other labels).
		ctrl.LoggerFrom(ctx).Info("Ignoring labels of a NodePoolLabelSet", "nodePoolLabelSet", source, "labels", ignored)
		c.recorder.Eventf(set, corev1.EventTypeWarning, "LabelsIgnored", "not applied, and pool-scheduler does not wait for them: %s", strings.Join(ignored, "; "))
	}
	if set.Spec.DecodeError != "" && (set.Status.State != labelsv1alpha1.SyncStateError || set.Status.ObservedGeneration != set.Generation) {
		c.recorder.Eventf(set, corev1.EventTypeWarning, "UnreadableSpec",
			"spec cannot be read (%s): the labeler changes no node of pool %s, and pool-scheduler counts none of their managed labels as stale until it is fixed",
			set.Spec.DecodeError, set.Name)
	}
	if equalStatus(set.Status, status) {
		return reconcile.Result{}, nil
	}
	// Optimistic lock: a merge patch computed against a cached set older than the server's sends
	// only the fields that differ from the cached status, and would leave the server's newer
	// values of the others in place (a status no computation produced, e.g. NodesMatched 2 with
	// NodesReady 0 and NodesHeld 1). With the resourceVersion in the patch such a write is
	// refused (Conflict) and retried once the cache has caught up.
	patch := client.MergeFromWithOptions(set.DeepCopy(), client.MergeFromWithOptimisticLock{})
	set.Status = status
	if err := c.client.Status().Patch(ctx, set, patch); err != nil {
		if apierrors.IsConflict(err) {
			// Not an error: the cache is behind; the newer set's event reconciles it again.
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

func equalStatus(a, b labelsv1alpha1.NodePoolLabelSetStatus) bool {
	if a.State != b.State || a.Message != b.Message || a.NodesMatched != b.NodesMatched ||
		a.NodesInSync != b.NodesInSync || a.NodesReady != b.NodesReady || a.NodesHeld != b.NodesHeld ||
		a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) || len(a.HeldNodes) != len(b.HeldNodes) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	for i := range a.HeldNodes {
		x, y := a.HeldNodes[i], b.HeldNodes[i]
		if x.Name != y.Name || x.Reason != y.Reason || x.Key != y.Key || x.Want != y.Want || x.Got != y.Got || !x.Since.Equal(&y.Since) {
			return false
		}
	}
	return true
}

// summarize keeps status messages short: the first few items and a count.
func summarize(items []string) string {
	const show = 3
	if len(items) <= show {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:show], "; "), len(items)-show)
}
