package floor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the controller's name (events' source, logs).
const Name = "budget-floor"

// Controller reconciles one namespace at a time: its workloads against the budgets there.
type Controller struct {
	client   client.Client
	recorder record.EventRecorder

	mu sync.Mutex
	// counts are the workloads metric's figures per namespace.
	counts map[string]map[reason]int
	// warned holds, per namespace, the generation of each workload last warned about
	// (overlapping or invalid selector): one event per change of the workload, not one per
	// reconcile of its namespace.
	warned map[string]map[types.UID]int64
}

// CacheOptions trims the workloads the manager's cache holds to what the floor reads (metadata,
// replicas, selector, the pod template's labels): the controller watches every Deployment and
// StatefulSet of the cluster, and their pod templates are most of their size.
func CacheOptions(opts *ctrl.Options) {
	if opts.Cache.ByObject == nil {
		opts.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.Cache.ByObject[&appsv1.Deployment{}] = cache.ByObject{Transform: trimWorkload}
	opts.Cache.ByObject[&appsv1.StatefulSet{}] = cache.ByObject{Transform: trimWorkload}
}

func trimWorkload(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.ManagedFields = nil
		o.Spec.Template.Spec = corev1.PodSpec{}
		o.Spec.Template.Annotations = nil
	case *appsv1.StatefulSet:
		o.ManagedFields = nil
		o.Spec.Template.Spec = corev1.PodSpec{}
		o.Spec.Template.Annotations = nil
		o.Spec.VolumeClaimTemplates = nil
	}
	return obj, nil
}

// SetupWithManager adds the floor to mgr (leader-elected with the spread mode). Every change
// that can change a namespace's budgets enqueues the namespace: a workload created, deleted,
// scaled or annotated, a budget created, deleted or changed, the namespace's labels or
// annotations changed. Status-only updates (most of a workload's and a budget's) pass by.
func SetupWithManager(mgr ctrl.Manager) error {
	c := &Controller{client: mgr.GetClient(), recorder: mgr.GetEventRecorderFor(Name), counts: map[string]map[reason]int{}, warned: map[string]map[types.UID]int64{}}
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	changed := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// client-go's rate-limited queue, not v0.23+'s priority queue (see pkg/labeler's
		// queueOptions: it can deadlock on shutdown).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, UsePriorityQueue: ptr.To(false)}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		}), builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&appsv1.Deployment{}, byNamespace, changed).
		Watches(&appsv1.StatefulSet{}, byNamespace, changed).
		Watches(&policyv1.PodDisruptionBudget{}, byNamespace, changed).
		Complete(c)
}

// Reconcile brings the floor's budgets in namespace req.Name to what decide says: one per
// workload kept, sized to its replicas, none for any other. It writes nothing when they are.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := klog.FromContext(ctx).WithValues("namespace", req.Name)
	ns := &corev1.Namespace{}
	on := false
	whyOff := namespaceOff
	switch err := c.client.Get(ctx, types.NamespacedName{Name: req.Name}, ns); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return reconcile.Result{}, err
	default:
		on = ns.Labels[NamespaceLabel] == "true" && ns.DeletionTimestamp == nil
		if on && ns.Annotations[EvictionAutoscalerAnnotation] == "true" {
			on, whyOff = false, byAutoscaler
		}
	}
	inNS := client.InNamespace(req.Name)
	var deployments appsv1.DeploymentList
	var statefulSets appsv1.StatefulSetList
	var budgets policyv1.PodDisruptionBudgetList
	for _, l := range []client.ObjectList{&deployments, &statefulSets, &budgets} {
		if err := c.client.List(ctx, l, inNS); err != nil {
			return reconcile.Result{}, err
		}
	}
	var all []workload
	for i := range deployments.Items {
		all = append(all, fromDeployment(&deployments.Items[i]))
	}
	for i := range statefulSets.Items {
		all = append(all, fromStatefulSet(&statefulSets.Items[i]))
	}
	ours := map[types.UID]*policyv1.PodDisruptionBudget{}
	byName := map[string]*policyv1.PodDisruptionBudget{}
	var foreign, strays []*policyv1.PodDisruptionBudget
	for i := range budgets.Items {
		p := &budgets.Items[i]
		byName[p.Name] = p
		switch {
		case p.Labels[ManagedByLabel] != ManagedBy:
			foreign = append(foreign, p)
		case ours[ownerOf(p)] != nil || ownerOf(p) == "":
			strays = append(strays, p)
		default:
			ours[ownerOf(p)] = p
		}
	}

	uids := map[types.UID]bool{}
	for _, w := range all {
		uids[w.obj.GetUID()] = true
	}
	var errs []error
	requeue := false
	// note sorts a write's error: a conflict (the cache was behind) is retried with the queue's
	// backoff, since the update that made it (a budget's status, say) may be one the watches'
	// predicates pass by.
	note := func(err error) {
		if errors.Is(err, errStale) {
			requeue = true
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	counts := map[reason]int{}
	c.mu.Lock()
	warned, nextWarned := c.warned[req.Name], map[types.UID]int64{}
	c.mu.Unlock()
	for _, w := range all {
		why := decide(w, all, foreign)
		if !on && why != deleting && why != tooSmall {
			why = whyOff
		}
		have := ours[w.obj.GetUID()]
		delete(ours, w.obj.GetUID())
		if why == kept {
			want := desired(w)
			if other := byName[want.Name]; have == nil && other != nil {
				if other.Labels[ManagedByLabel] == ManagedBy && !uids[ownerOf(other)] {
					// The floor's budget of a workload replaced under the same name: removed
					// below; its deletion's event brings this one's budget.
					continue
				}
				why = nameTaken
			}
			if why == kept {
				counts[kept]++
				note(c.keep(ctx, w, have, want))
				continue
			}
		}
		switch why {
		case tooSmall, deleting, namespaceOff:
		default:
			counts[why]++
		}
		if why == overlap || why == badSelector || why == nameTaken {
			uid, gen := w.obj.GetUID(), w.obj.GetGeneration()
			if last, seen := warned[uid]; !seen || last != gen {
				c.warn(w, why)
			}
			nextWarned[uid] = gen
		}
		if have != nil {
			note(c.remove(ctx, have, w, why))
		}
	}
	// What is left has no workload of its own here (it was deleted: the garbage collector would
	// remove them too), and strays a second budget for one owner.
	for _, p := range ours {
		strays = append(strays, p)
	}
	for _, p := range strays {
		note(c.remove(ctx, p, workload{}, "no_workload"))
	}
	c.mu.Lock()
	if len(nextWarned) == 0 {
		delete(c.warned, req.Name)
	} else {
		c.warned[req.Name] = nextWarned
	}
	c.mu.Unlock()
	c.setCounts(req.Name, counts)
	logger.V(4).Info("Budget floor reconciled", "workloads", counts)
	res := reconcile.Result{}
	if requeue {
		res.RequeueAfter = time.Second
	}
	return res, errors.Join(errs...)
}

// errStale: a write refused because the cache was behind (a conflict); the namespace is
// reconciled again.
var errStale = errors.New("stale")

// keep creates or corrects w's budget.
func (c *Controller) keep(ctx context.Context, w workload, have, want *policyv1.PodDisruptionBudget) error {
	if have == nil {
		if err := c.client.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil // the cache is behind: the create's own event reconciles again
			}
			writes.WithLabelValues("create", "error").Inc()
			return fmt.Errorf("creating %s/%s: %w", want.Namespace, want.Name, err)
		}
		c.kept(w, want, "create", "BudgetFloorCreated")
		return nil
	}
	if sameSpec(have, want) {
		return nil
	}
	next := have.DeepCopy()
	next.Spec = want.Spec
	if err := c.client.Update(ctx, next); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		writes.WithLabelValues("update", "error").Inc()
		return fmt.Errorf("updating %s/%s: %w", have.Namespace, have.Name, err)
	}
	c.kept(w, want, "update", "BudgetFloorResized")
	return nil
}

// kept counts a write of w's budget and tells it on the workload.
func (c *Controller) kept(w workload, want *policyv1.PodDisruptionBudget, operation, eventReason string) {
	writes.WithLabelValues(operation, "success").Inc()
	c.recorder.Eventf(w.obj, corev1.EventTypeNormal, eventReason,
		"PodDisruptionBudget %s: minAvailable %s of %d replicas", want.Name, want.Spec.MinAvailable.String(), w.replicas)
}

// remove deletes one of the floor's budgets (that object: one replaced in the meantime under the
// same name is judged again).
func (c *Controller) remove(ctx context.Context, p *policyv1.PodDisruptionBudget, w workload, why reason) error {
	err := c.client.Delete(ctx, p, client.Preconditions{UID: &p.UID})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return errStale
	case err != nil:
		writes.WithLabelValues("delete", "error").Inc()
		return fmt.Errorf("deleting %s/%s: %w", p.Namespace, p.Name, err)
	}
	writes.WithLabelValues("delete", "success").Inc()
	if w.obj != nil {
		c.recorder.Eventf(w.obj, corev1.EventTypeNormal, "BudgetFloorRemoved", "PodDisruptionBudget %s removed: %s", p.Name, why)
	}
	return nil
}

// warn records a Warning event on a workload the floor cannot keep a budget for.
func (c *Controller) warn(w workload, why reason) {
	msg := "no budget floor: its selector matches another Deployment's or StatefulSet's pods here"
	switch why {
	case badSelector:
		msg = "no budget floor: its selector is empty or invalid"
	case nameTaken:
		msg = fmt.Sprintf("no budget floor: the PodDisruptionBudget %s exists and is not this %s's", budgetName(w.obj.GetName()), w.kind)
	}
	c.recorder.Event(w.obj, corev1.EventTypeWarning, "BudgetFloorSkipped", msg)
}

// setCounts records namespace's figures and publishes the workloads metric.
func (c *Controller) setCounts(namespace string, counts map[reason]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(counts) == 0 {
		delete(c.counts, namespace)
	} else {
		c.counts[namespace] = counts
	}
	total := map[reason]int{}
	for _, m := range c.counts {
		for r, n := range m {
			total[r] += n
		}
	}
	for _, r := range []reason{kept, optedOut, ownBudget, overlap, badSelector, nameTaken, byAutoscaler} {
		workloadsGauge.WithLabelValues(string(r)).Set(float64(total[r]))
	}
}
