package labeler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// maxHeldNodes bounds NodePoolLabelSetStatus.HeldNodes (the CRD's maxItems).
const maxHeldNodes = 20

// Condition types of NodePoolLabelSet status.
const (
	// ConditionSynced: every node of the pool carries the set's labels.
	ConditionSynced = "Synced"
	// ConditionNodesReady: NodePoolReady accepts every node of the pool.
	ConditionNodesReady = "NodesReady"
	// ConditionLabelSetConflict: another set of the pool, in another namespace, gives one of
	// this set's keys another value.
	ConditionLabelSetConflict = "LabelSetConflict"
)

// Controller reconciles nodes towards their pool's NodePoolLabelSet and writes each set's status.
type Controller struct {
	client   client.Client
	recorder record.EventRecorder
	opts     Options
	holds    *holds
	now      func() time.Time
	// deleted remembers the pools whose last set in view this controller saw deleted: only
	// their managed labels are removed when no set of the pool is in view (see reconcileNode).
	deleted *deletedPools
	// conditions remembers the condition this controller last wrote on each node (see
	// keepCondition).
	conditions *conditionWrites
}

// labelledPoolIndex indexes nodes by the pool a labeler labelled them in (pool.Labelled), so a
// verdict on a pool with no set in view asks the cache one question, not every node.
const labelledPoolIndex = "pool-scheduler.io/labelled-pool"

// deletedPoolMemory is how long a deleted set's pool is remembered for the removal of its
// labels; a node reconciled later (the resync is 10 minutes) keeps them.
const deletedPoolMemory = time.Hour

// deletedPools is the set of pools whose sets were deleted while the controller ran.
type deletedPools struct {
	mu    sync.Mutex
	pools map[string]time.Time
}

func (d *deletedPools) add(pool string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for p, at := range d.pools {
		if now.Sub(at) > deletedPoolMemory {
			delete(d.pools, p)
		}
	}
	d.pools[pool] = now
}

func (d *deletedPools) has(pool string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.pools[pool]
	return ok && now.Sub(at) <= deletedPoolMemory
}

func (d *deletedPools) forget(pool string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pools, pool)
}

// nodeWorkers is how many nodes the node controller reconciles at once. A joining node costs two
// API round trips in sequence (labels with the taint, then the condition), so with one worker a
// pool scaled up by hundreds of nodes waits for its last node's lift one round trip pair per node
// ahead of it (BenchmarkStartupTaintChurn, docs/gate.md). A node is never reconciled by two
// workers at once (the work queue's guarantee); what they share is locked (holds, deleted).
const nodeWorkers = 4

// queueOptions are both controllers' work-queue options: client-go's rate-limited queue, as
// controller-runtime v0.22 (the default line) uses by default, and not the priority queue that
// v0.23+ (the 1.36 line's v0.24) turns on. That queue can deadlock on shutdown
// (kubernetes-sigs/controller-runtime#3538, fixed by #3540 after v0.24.1): a worker returns
// through the closed done channel while handleReadyItems, holding the queue's lock, blocks
// forever handing it an item. A stopping labeler then leaves goroutines behind and its manager
// waits out the graceful-shutdown timeout, which delays the Lease's release to the next leader
// (TestLabelerStopsCleanly).
func queueOptions(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers, UsePriorityQueue: ptr.To(false)}
}

// SetupWithManager registers the node and the NodePoolLabelSet controllers with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if opts.StartupTaintKey != "" {
		if errs := validation.IsQualifiedName(opts.StartupTaintKey); len(errs) > 0 {
			return fmt.Errorf("startup taint key (--startup-taint-key) %q: %s", opts.StartupTaintKey, strings.Join(errs, "; "))
		}
	}
	c := &Controller{client: mgr.GetClient(), recorder: mgr.GetEventRecorderFor("pool-labeler"), opts: opts, holds: newHolds(), now: time.Now,
		deleted: &deletedPools{pools: map[string]time.Time{}}, conditions: newConditionWrites()}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Node{}, labelledPoolIndex, func(obj client.Object) []string {
		if p, ok := opts.Gate.Identity.PoolOf(obj.GetLabels()); ok && pool.Labelled(obj.GetAnnotations()) {
			return []string{p}
		}
		return nil
	}); err != nil {
		return err
	}
	// The held-node metrics are this controller's while it runs (on the leader only).
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		holdMetrics.add(c.holds)
		<-ctx.Done()
		holdMetrics.remove(c.holds)
		return nil
	})); err != nil {
		return err
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("node").
		WithOptions(queueOptions(nodeWorkers)).
		// Every node update passes (a periodic resync arrives as an update without changes, and
		// must be reconciled); unchanged nodes cost one cached read and no write.
		// A change of the condition PoolLabelsApplied passes too: another node-status writer's
		// forged condition is judged again at once, not at the next resync.
		For(&corev1.Node{}, builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, resync{}, startupTaintChanged{key: opts.StartupTaintKey}, conditionChanged{}))).
		Watches(&labelsv1alpha1.NodePoolLabelSet{}, handler.EnqueueRequestsFromMapFunc(c.nodesOfSet),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A deletion is remembered before the pool's nodes are reconciled: see reconcileNode.
		Watches(&labelsv1alpha1.NodePoolLabelSet{}, handler.Funcs{
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if c.watches(e.Object.GetNamespace()) {
					c.deleted.add(e.Object.GetName(), c.now())
					for _, r := range c.nodesOfSet(ctx, e.Object) {
						q.Add(r)
					}
				}
			},
		}).
		Complete(reconcile.Func(c.reconcileNode))
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodepoollabelset").
		WithOptions(queueOptions(1)).
		// Status changes too: the status is computed from the cache, so a write made while the
		// cache held an older status (skipped as equal, or refused as stale below) is corrected
		// when the newer one arrives. Its own writes cost one reconcile that writes nothing.
		For(&labelsv1alpha1.NodePoolLabelSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, statusChanged{}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.setsOfNode),
			builder.WithPredicates(nodeChanged{})).
		// A set of the same pool in another namespace can put this one in conflict, or out.
		Watches(&labelsv1alpha1.NodePoolLabelSet{}, handler.EnqueueRequestsFromMapFunc(c.setsOfPool),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(reconcile.Func(c.reconcileStatus))
}

// resync passes the periodic resync's updates, in which the object did not change.
type resync struct{ predicate.Funcs }

func (resync) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion()
}

// startupTaintChanged passes updates that put on or take off the startup taint (someone
// else's kubectl taint), so the startup-taint metrics follow it.
type startupTaintChanged struct {
	predicate.Funcs
	key string
}

func (p startupTaintChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	if !ok1 || !ok2 {
		return false
	}
	_, was := pool.StartupTaintedSince(o, p.key)
	_, is := pool.StartupTaintedSince(n, p.key)
	return was != is
}

// conditionChanged passes node updates that change the condition PoolLabelsApplied (its
// status, reason or message): the kubelet's heartbeats, which change other conditions, do not.
type conditionChanged struct{ predicate.Funcs }

func (conditionChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	if !ok1 || !ok2 {
		return false
	}
	was, is := poolCondition(o), poolCondition(n)
	if was == nil || is == nil {
		return was != is
	}
	return was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message
}

// poolCondition is node's condition PoolLabelsApplied, nil if it has none.
func poolCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == pool.ConditionPoolLabelsApplied {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func (c *Controller) watches(namespace string) bool {
	if len(c.opts.Namespaces) == 0 {
		return true
	}
	for _, ns := range c.opts.Namespaces {
		if ns == namespace {
			return true
		}
	}
	return false
}

// labelSets returns the compiled NodePoolLabelSets of the watched namespaces.
func (c *Controller) labelSets(ctx context.Context) (*pool.LabelSets, []*labelsv1alpha1.NodePoolLabelSet, error) {
	var list labelsv1alpha1.NodePoolLabelSetList
	if err := c.client.List(ctx, &list); err != nil {
		return nil, nil, err
	}
	var sets []*labelsv1alpha1.NodePoolLabelSet
	for i := range list.Items {
		if s := &list.Items[i]; c.watches(s.Namespace) && s.DeletionTimestamp == nil {
			sets = append(sets, s)
		}
	}
	return c.opts.Gate.CompileLabelSets(sets), sets, nil
}

// setsOfPool returns the other watched sets of obj's pool.
func (c *Controller) setsOfPool(ctx context.Context, obj client.Object) []reconcile.Request {
	if !c.watches(obj.GetNamespace()) {
		return nil
	}
	_, sets, err := c.labelSets(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing NodePoolLabelSets for a NodePoolLabelSet change")
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range sets {
		if s.Name == obj.GetName() && s.Namespace != obj.GetNamespace() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}

func (c *Controller) nodesOfSet(ctx context.Context, obj client.Object) []reconcile.Request {
	if !c.watches(obj.GetNamespace()) {
		return nil
	}
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing nodes for a NodePoolLabelSet change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range nodes.Items {
		if name, ok := c.opts.Gate.Identity.PoolOf(nodes.Items[i].Labels); ok && name == obj.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
		}
	}
	return reqs
}

func (c *Controller) setsOfNode(ctx context.Context, obj client.Object) []reconcile.Request {
	name, ok := c.opts.Gate.Identity.PoolOf(obj.GetLabels())
	if !ok {
		return nil
	}
	_, sets, err := c.labelSets(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing NodePoolLabelSets for a node change")
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range sets {
		if s.Name == name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}

// reconcileNode applies the node's pool labels in one patch.
func (c *Controller) reconcileNode(ctx context.Context, req reconcile.Request) (result reconcile.Result, err error) {
	defer func() { recordReconcile("node", err) }()
	logger := ctrl.LoggerFrom(ctx)
	node := &corev1.Node{}
	if err := c.client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			c.holds.forget(req.Name)
			c.conditions.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// As the cache shows it; a patch below lifting the taint brings the node back here.
	taintPool, _ := c.opts.Gate.Identity.PoolOf(node.Labels)
	since, tainted := pool.StartupTaintedSince(node, c.opts.StartupTaintKey)
	c.holds.observeTaint(node.Name, taintPool, since, tainted)
	compiled, sets, err := c.labelSets(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The node as it is now, by the scheduler's rule; a patch below changes it, and its update
	// event brings it back here.
	var desired *pool.PoolLabels
	poolName, known := c.opts.Gate.Identity.PoolOf(node.Labels)
	if known {
		desired = compiled.Pool(poolName)
		if desired == nil {
			if compiled, err = c.withLabelledPool(ctx, compiled, poolName); err != nil {
				return reconcile.Result{}, err
			}
		} else {
			c.deleted.forget(poolName)
		}
	}
	result = c.judgeNode(ctx, node, compiled, sets)
	if known && desired == nil && !c.deleted.has(poolName, c.now()) {
		// No set of the pool in view, and none seen deleted: the labels the annotation names
		// may be wanted by a set in a namespace not read here (the nodepool-labels-operator's,
		// say). Removing them would be a guess; leave the node alone (but for the condition,
		// which is ours and kept only on nodes of pools with a set).
		return c.keepConditionWith(ctx, result, node, nil)
	}
	if desired != nil && desired.Unreadable {
		// A set of the pool could not be read (its status and event say why): change nothing
		// on a guess. The scheduler counts no managed label as stale meanwhile, for every node
		// of the pool alike (pool.PoolLabels.Unreadable).
		logger.V(1).Info("Leaving node alone: a NodePoolLabelSet of its pool cannot be read", "node", node.Name)
		return c.keepConditionWith(ctx, result, node, c.verdictIn(desired, node.Labels, node.Annotations, compiled))
	}
	plan := PlanNodeForGate(&c.opts.Gate, node.Labels, node.Annotations, desired, c.opts.OverwriteConflicts)
	if plan.MalformedAnnotation {
		c.recorder.Eventf(node, corev1.EventTypeWarning, "MalformedAnnotation",
			"%s is not a JSON array of label keys; rewriting it (no label removed on a guess)", pool.ManagedLabelsAnnotation)
	}
	for _, conflict := range plan.Conflicts {
		c.recorder.Eventf(node, corev1.EventTypeWarning, "LabelConflict", "not applied: %s", conflict)
	}
	if known && (desired != nil || c.deleted.has(poolName, c.now())) {
		// The startup taint goes the moment the node is ready as this patch leaves it, never
		// before: judged by the scheduler's rule on the labels after the patch. A pool whose set
		// was deleted wants nothing, so its nodes are released too; a pool with no set in view
		// (not yet created, or read elsewhere) keeps the taint.
		labels, annotations := plan.Applied(node.Labels, node.Annotations)
		if c.opts.Gate.Check(labels, annotations, compiled).Ready() {
			plan.LiftStartupTaint(node.Spec.Taints, c.opts.StartupTaintKey)
		}
	}
	if plan.Empty() {
		return c.keepConditionWith(ctx, result, node, c.verdictIn(desired, node.Labels, node.Annotations, compiled))
	}
	patch, err := plan.MergePatch(node.ResourceVersion)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := c.client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			// The node changed since it was read: its update event requeues it.
			return reconcile.Result{Requeue: true}, nil
		}
		patchErrors.Inc()
		c.recorder.Eventf(node, corev1.EventTypeWarning, "PatchFailed", "applying pool labels: %v", err)
		return reconcile.Result{}, err
	}
	if plan.TaintsChanged {
		c.holds.observeTaint(node.Name, "", time.Time{}, false)
	}
	logger.V(1).Info("Applied pool labels", "node", node.Name, "set", plan.Set, "removed", plan.Remove, "liftedStartupTaint", plan.TaintsChanged)
	// The condition as the patch left the node: the update event that follows finds it right.
	labels, annotations := plan.Applied(node.Labels, node.Annotations)
	return c.keepConditionWith(ctx, result, node, c.verdictIn(desired, labels, annotations, compiled))
}

// verdictIn is the gate's verdict on a node of a pool with a set in view (desired), nil for a
// node of any other (no condition is kept there).
func (c *Controller) verdictIn(desired *pool.PoolLabels, labels, annotations map[string]string, compiled *pool.LabelSets) *pool.Verdict {
	if desired == nil {
		return nil
	}
	v := c.opts.Gate.Check(labels, annotations, compiled)
	return &v
}

// keepConditionWith is keepCondition after the node's judgement (result): the earlier of their
// requeues.
func (c *Controller) keepConditionWith(ctx context.Context, result reconcile.Result, node *corev1.Node, v *pool.Verdict) (reconcile.Result, error) {
	kept, err := c.keepCondition(ctx, node, v)
	if kept.RequeueAfter > 0 && (result.RequeueAfter == 0 || kept.RequeueAfter < result.RequeueAfter) {
		result.RequeueAfter = kept.RequeueAfter
	}
	return result, err
}

// keepCondition writes the node condition PoolLabelsApplied as v says (nil: the node is in no
// pool with a set in view, and carries none), in one status patch and only when it changes.
func (c *Controller) keepCondition(ctx context.Context, node *corev1.Node, v *pool.Verdict) (reconcile.Result, error) {
	current := poolCondition(node)
	var patch map[string]any
	var want corev1.NodeCondition // zero: no condition
	switch {
	case v == nil && current == nil:
		return reconcile.Result{}, nil
	case v == nil:
		if c.conditions.wrote(node.Name, node.ResourceVersion, want) {
			return reconcile.Result{}, nil
		}
		patch = map[string]any{"type": pool.ConditionPoolLabelsApplied, "$patch": "delete"}
	default:
		want = ConditionFor(*v)
		if current != nil && current.Status == want.Status && current.Reason == want.Reason && current.Message == want.Message {
			return reconcile.Result{}, nil
		}
		if c.conditions.wrote(node.Name, node.ResourceVersion, want) {
			return reconcile.Result{}, nil
		}
		now := metav1.NewTime(c.now().Truncate(time.Second))
		want.LastHeartbeatTime, want.LastTransitionTime = now, now
		if current != nil && current.Status == want.Status {
			want.LastTransitionTime = current.LastTransitionTime
		}
		patch = map[string]any{"type": want.Type, "status": want.Status, "reason": want.Reason, "message": want.Message,
			"lastHeartbeatTime": want.LastHeartbeatTime, "lastTransitionTime": want.LastTransitionTime}
	}
	if wait := c.conditions.wait(node.Name, c.now()); wait > 0 {
		conditionWritesDeferred.Inc()
		ctrl.LoggerFrom(ctx).V(1).Info("Condition rewritten too often: another writer may be setting it; the write waits", "node", node.Name,
			"condition", pool.ConditionPoolLabelsApplied, "writes", conditionWriteBudget, "window", conditionWriteWindow, "wait", wait)
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{patch}}})
	if err != nil {
		return reconcile.Result{}, err
	}
	from := node.ResourceVersion
	if err := c.client.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		patchErrors.Inc()
		return reconcile.Result{}, fmt.Errorf("writing node condition %s: %w", pool.ConditionPoolLabelsApplied, err)
	}
	c.conditions.record(node.Name, from, want, c.now())
	return reconcile.Result{}, nil
}

// conditionWrites remembers, per node, the condition this controller last wrote and the node's
// resourceVersion it wrote it on. A label patch and the condition's status patch are two writes:
// the label patch's update event often reaches the cache before the status patch's, and the
// reconcile it brings sees the node without the condition just written. The node at exactly that
// version, wanting exactly that condition, needs no second write; any other change to the node
// gives it another resourceVersion, and the condition is judged again.
//
// It also caps the writes per node (conditionWriteBudget per conditionWriteWindow): a condition
// event brings the node back at once, so another writer that keeps setting its own value (a
// second labeler with other sets in view) would otherwise fight this one at API speed. Past the
// cap the write waits for the window's end.
type conditionWrites struct {
	mu    sync.Mutex
	nodes map[string]conditionWrite
}

type conditionWrite struct {
	from string // the node's resourceVersion the status patch was made on
	cond corev1.NodeCondition
	// The writes to the node since windowStart.
	windowStart time.Time
	writes      int
}

const (
	conditionWriteBudget = 4
	conditionWriteWindow = time.Minute
)

func newConditionWrites() *conditionWrites {
	return &conditionWrites{nodes: map[string]conditionWrite{}}
}

func (w *conditionWrites) record(node, from string, cond corev1.NodeCondition, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.nodes[node]
	if now.Sub(last.windowStart) >= conditionWriteWindow {
		last.windowStart, last.writes = now, 0
	}
	w.nodes[node] = conditionWrite{from: from, cond: cond, windowStart: last.windowStart, writes: last.writes + 1}
}

// wait is how long a write to node must wait for the cap (0: it may write now).
func (w *conditionWrites) wait(node string, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.nodes[node]
	if !ok || last.writes < conditionWriteBudget || now.Sub(last.windowStart) >= conditionWriteWindow {
		return 0
	}
	return last.windowStart.Add(conditionWriteWindow).Sub(now)
}

// wrote reports whether cond was written on node when it was at resourceVersion rv (the zero
// condition: removed).
func (w *conditionWrites) wrote(node, rv string, cond corev1.NodeCondition) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.nodes[node]
	return ok && rv != "" && last.from == rv && last.cond.Status == cond.Status && last.cond.Reason == cond.Reason && last.cond.Message == cond.Message
}

func (w *conditionWrites) forget(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.nodes, node)
}

// ConditionFor is the PoolLabelsApplied condition for a node of a pool with a set, by the
// gate's verdict: True once NodePoolReady accepts the node, else False with the held reason.
func ConditionFor(v pool.Verdict) corev1.NodeCondition {
	if v.Ready() {
		return corev1.NodeCondition{Type: pool.ConditionPoolLabelsApplied, Status: corev1.ConditionTrue, Reason: "LabelsApplied",
			Message: fmt.Sprintf("pool %s: the labels of its NodePoolLabelSet are applied", v.Pool)}
	}
	return corev1.NodeCondition{Type: pool.ConditionPoolLabelsApplied, Status: corev1.ConditionFalse, Reason: string(v.HeldReason()),
		Message: fmt.Sprintf("pool %s: %s", v.Pool, v.Detail())}
}

// withLabelledPool returns compiled with poolName marked labelled if a labeler has labelled a
// node of the pool (the scheduler's view: a pool labelled from a set not in view holds its
// unlabelled nodes, pool.LabelSets.WithLabelledPools).
func (c *Controller) withLabelledPool(ctx context.Context, compiled *pool.LabelSets, poolName string) (*pool.LabelSets, error) {
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes, client.MatchingFields{labelledPoolIndex: poolName}, client.Limit(1)); err != nil {
		return nil, err
	}
	if len(nodes.Items) == 0 {
		return compiled, nil
	}
	return compiled.WithLabelledPools([]string{poolName}), nil
}

// judgeNode applies the scheduler's rule to node, records the hold, sends the held-too-long
// event when it is due, and asks to be called again when it will be.
func (c *Controller) judgeNode(ctx context.Context, node *corev1.Node, compiled *pool.LabelSets, sets []*labelsv1alpha1.NodePoolLabelSet) reconcile.Result {
	v := c.opts.Gate.Check(node.Labels, node.Annotations, compiled)
	now := c.now()
	since := c.holds.observe(node.Name, v, now, recordedSince(sets, v.Pool, node.Name))
	if v.Ready() {
		return reconcile.Result{}
	}
	due, wait := c.holds.warn(node.Name, now, c.opts.HoldWarningAfter)
	if due {
		pool := v.Pool
		if pool == "" {
			pool = "(none)"
		}
		c.recorder.Eventf(node, corev1.EventTypeWarning, "NodeHeld",
			"pool-scheduler has kept pods off this node for %v (since %s): pool %s: %s",
			now.Sub(since).Round(time.Second), since.UTC().Format(time.RFC3339), pool, v.Detail())
		ctrl.LoggerFrom(ctx).Info("Node held longer than --hold-warning-after", "node", node.Name, "pool", v.Pool, "since", since, "reason", v.Detail())
	}
	return reconcile.Result{RequeueAfter: wait}
}

// recordedSince is the time a set of the pool recorded node as held since, or zero.
func recordedSince(sets []*labelsv1alpha1.NodePoolLabelSet, poolName, node string) time.Time {
	var since time.Time
	for _, s := range sets {
		if s.Name != poolName {
			continue
		}
		for _, h := range s.Status.HeldNodes {
			if h.Name == node && !h.Since.IsZero() && (since.IsZero() || h.Since.Time.Before(since)) {
				since = h.Since.Time
			}
		}
	}
	return since
}
