package nodepoolready

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// labelSetIndex keeps the compiled NodePoolLabelSets the plugin judges nodes against, fed by the
// plugin's own informer only: queueing hints decide, they do not update it (the scheduler calls
// them once per waiting pod, and not at all when none waits).
//
// The scheduler's informer, which calls the hints, and this one are separate: a pod requeued by
// a label-set change may be retried before this index has the change and be refused again, its
// event spent. PostFilter closes that gap: it remembers the pod and activates it at once if the
// index changed during the cycle; a change that comes later activates the remembered pods
// (onInformerChange).
// Updates are ordered by (UID, generation), and deleted UIDs are remembered, so a stale event
// never moves the index backwards.
//
// It also keeps, from the node handler, the pools whose nodes a labeler has labelled (a
// managed-labels annotation naming keys): a pool labelled that way with no set in view is
// labelled from a namespace the gate does not read (pool.LabelSets.WithLabelledPools).
type labelSetIndex struct {
	// namespaces are read (nil: every namespace).
	namespaces []string
	// identity is the gate's: sets may not give its keys another pool's name.
	identity pool.Identity
	// systemNodeKeys are the gate's: sets may not name them (pool.RefusedKey).
	systemNodeKeys []string

	mu      sync.Mutex
	objects map[types.NamespacedName]*labelsv1alpha1.NodePoolLabelSet
	// deleted remembers deleted UIDs, so a lagging feed cannot bring a deleted set back.
	deleted map[types.UID]struct{}
	// base is compiled from objects; compiled adds the labelled pools to it.
	base *pool.LabelSets
	// labelled counts the labelled nodes per pool; labelledNode is the pool each was counted in.
	labelled     map[string]int
	labelledNode map[string]string
	// deletedPools are pools whose last set in view this index saw deleted while nodes of the
	// pool were labelled: their managed labels are stale until the labeler has removed them
	// (the pool's labelled count drops to 0) or a set of the pool is back.
	deletedPools map[string]struct{}
	// unread are the pools with sets in namespaces not read, and those namespaces (setUnread).
	unread map[string][]string
	// notVisible is compiled.NotVisible() as last published.
	notVisible []string
	// onNotVisible runs (under mu) with the pools that have just become labelled from sets not
	// in view, and the node that showed it.
	onNotVisible func(pools []string, node string)

	compiled atomic.Pointer[pool.LabelSets]

	// onInformerChange runs when the plugin's own informer changes the desired labels.
	onInformerChange func()
}

func newLabelSetIndex(namespaces []string) *labelSetIndex {
	idx := &labelSetIndex{
		namespaces:   namespaces,
		objects:      map[types.NamespacedName]*labelsv1alpha1.NodePoolLabelSet{},
		deleted:      map[types.UID]struct{}{},
		base:         pool.EmptyLabelSets,
		labelled:     map[string]int{},
		labelledNode: map[string]string{},
		deletedPools: map[string]struct{}{},
	}
	idx.compiled.Store(pool.EmptyLabelSets)
	return idx
}

// current returns the compiled index; it is immutable and never nil.
func (x *labelSetIndex) current() *pool.LabelSets { return x.compiled.Load() }

func (x *labelSetIndex) watches(namespace string) bool {
	return len(x.namespaces) == 0 || slices.Contains(x.namespaces, namespace)
}

// observeNode records whether node is labelled, and in which pool; it reports whether the
// published index changed (a pool without a set in view became labelled, or stopped being).
// Called by the node handler for every node add and update that changes labels or the
// annotation, so it does no more than a map update in the common case.
func (x *labelSetIndex) observeNode(node *v1.Node) bool {
	p, known := x.identity.PoolOf(node.Labels)
	labelled := known && pool.Labelled(node.Annotations)
	x.mu.Lock()
	defer x.mu.Unlock()
	was, counted := x.labelledNode[node.Name]
	if counted == labelled && (!counted || was == p) {
		return false
	}
	changed := false
	if counted {
		changed = x.uncountLocked(node.Name, was) || changed
	}
	if labelled {
		x.labelledNode[node.Name] = p
		x.labelled[p]++
		changed = x.labelled[p] == 1 && x.base.Pool(p) == nil || changed
	}
	if changed {
		x.publishLocked(node.Name)
	}
	return changed
}

// forgetNode drops a deleted node; it reports whether the published index changed.
func (x *labelSetIndex) forgetNode(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	p, counted := x.labelledNode[name]
	if !counted || !x.uncountLocked(name, p) {
		return false
	}
	x.publishLocked("")
	return true
}

// uncountLocked reports whether the pool's last labelled node went and the pool has no set.
func (x *labelSetIndex) uncountLocked(node, p string) bool {
	delete(x.labelledNode, node)
	x.labelled[p]--
	if x.labelled[p] > 0 {
		return false
	}
	delete(x.labelled, p)
	if _, ok := x.deletedPools[p]; ok {
		// The labeler has removed the deleted set's labels: nothing left to call stale.
		delete(x.deletedPools, p)
		return true
	}
	return x.base.Pool(p) == nil
}

// upsert records set and reports whether the desired labels changed.
func (x *labelSetIndex) upsert(logger klog.Logger, set *labelsv1alpha1.NodePoolLabelSet) bool {
	if !x.watches(set.Namespace) {
		return false
	}
	if set.DeletionTimestamp != nil {
		// Being deleted: the labeler already removes its labels, so it is no longer desired.
		return x.remove(logger, set)
	}
	key := types.NamespacedName{Namespace: set.Namespace, Name: set.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, gone := x.deleted[set.UID]; gone {
		return false
	}
	old := x.objects[key]
	if old != nil && old.UID == set.UID && old.Generation >= set.Generation {
		return false
	}
	if old != nil && old.UID != set.UID {
		// Recreated under the same name: the old object is gone even if its delete is still in flight.
		x.deleted[old.UID] = struct{}{}
	}
	x.objects[key] = set
	changed := old == nil || old.UID != set.UID || !maps.Equal(old.Spec.Labels, set.Spec.Labels)
	if changed {
		x.recompile(logger)
	}
	return changed
}

// remove drops set and reports whether it was indexed.
func (x *labelSetIndex) remove(logger klog.Logger, set *labelsv1alpha1.NodePoolLabelSet) bool {
	if !x.watches(set.Namespace) {
		return false
	}
	key := types.NamespacedName{Namespace: set.Namespace, Name: set.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleted[set.UID] = struct{}{}
	old := x.objects[key]
	if old == nil || old.UID != set.UID {
		return false
	}
	delete(x.objects, key)
	if x.labelled[set.Name] > 0 {
		// If this was the pool's last set in view, it stopped wanting its labels: they are
		// stale now, not labelled from a set out of view (recompile forgets this if another
		// set of the pool remains).
		x.deletedPools[set.Name] = struct{}{}
	}
	x.recompile(logger)
	return true
}

func (x *labelSetIndex) recompile(logger klog.Logger) {
	sets := make([]*labelsv1alpha1.NodePoolLabelSet, 0, len(x.objects))
	for _, s := range x.objects {
		sets = append(sets, s)
	}
	gate := pool.Gate{Identity: x.identity, SystemNodeKeys: x.systemNodeKeys}
	compiled := gate.CompileLabelSets(sets)
	problems := 0
	for _, name := range compiled.Pools() {
		for _, p := range compiled.Pool(name).Problems {
			problems++
			logger.Error(nil, "Ignoring part of a NodePoolLabelSet", "plugin", Name, "pool", name, "problem", p)
		}
	}
	labelSetProblems.Set(float64(problems))
	x.base = compiled
	for p := range x.deletedPools {
		if compiled.Pool(p) != nil {
			delete(x.deletedPools, p)
		}
	}
	x.publishLocked("")
}

// publishLocked stores base with the labelled pools and reports pools newly labelled from sets
// not in view (node: the node that showed it, "" when a set change did).
func (x *labelSetIndex) publishLocked(node string) {
	pools := make([]string, 0, len(x.labelled))
	for p := range x.labelled {
		pools = append(pools, p)
	}
	deleted := make([]string, 0, len(x.deletedPools))
	for p := range x.deletedPools {
		deleted = append(deleted, p)
	}
	compiled := x.base.WithLabelledPools(pools).WithDeletedPools(deleted).WithUnreadSets(x.unread, x.namespaces)
	x.compiled.Store(compiled)
	notVisible := compiled.NotVisible()
	poolsNotVisible.Set(float64(len(notVisible)))
	var added []string
	for _, p := range notVisible {
		if !slices.Contains(x.notVisible, p) {
			added = append(added, p)
		}
	}
	x.notVisible = notVisible
	if len(added) > 0 && x.onNotVisible != nil {
		x.onNotVisible(added, node)
	}
}

// setUnread records the pools that have NodePoolLabelSets in namespaces not read (unreadSets):
// their unlabelled nodes are held from the first (pool.LabelSets.WithUnreadSets).
func (x *labelSetIndex) setUnread(unread map[string][]string) {
	x.mu.Lock()
	x.unread = unread
	x.publishLocked("")
	x.mu.Unlock()
	if x.onInformerChange != nil {
		x.onInformerChange()
	}
}

func (x *labelSetIndex) informerChanged() {
	if x.onInformerChange != nil {
		x.onInformerChange()
	}
}

// startInformer watches NodePoolLabelSets through a dynamic informer (no generated clientset)
// and blocks until it has synced or ctx ends.
func (x *labelSetIndex) startInformer(ctx context.Context, cfg *rest.Config) error {
	logger := klog.FromContext(ctx)
	if cfg == nil {
		return fmt.Errorf("%s: no kubeconfig to watch NodePoolLabelSets with", Name)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: building a client for NodePoolLabelSets: %w", Name, err)
	}
	namespaces := x.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	// One informer per namespace: the scheduler may read label sets only where it is told, and
	// RBAC may grant exactly that (a Role per namespace).
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, ns, nil)
		informer := factory.ForResource(labelsv1alpha1.Resource).Informer()
		if err := x.handle(logger, informer); err != nil {
			return err
		}
		factory.Start(ctx.Done())
		synced = append(synced, informer.HasSynced)
	}

	// Without the CRD there are no label sets to enforce: start anyway (requiredLabelKeys and
	// unknownPoolPolicy still apply) and let the informer pick the sets up once it is installed,
	// so that a scheduler without the CRD, such as a benchmark harness, is not stuck.
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: building a discovery client: %w", Name, err)
	}
	if _, err := disco.ServerResourcesForGroupVersion(labelsv1alpha1.SchemeGroupVersion.String()); apierrors.IsNotFound(err) {
		logger.Error(nil, "The NodePoolLabelSet CRD is not installed: only requiredLabelKeys and unknownPoolPolicy are enforced until it is (kubectl apply -k manifests/crds)", "plugin", Name)
		return nil
	}

	// Say why the scheduler is not starting, instead of hanging silently.
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				logger.Info("Waiting for the NodePoolLabelSet informer to sync; is the CRD from manifests/crds installed and readable by the scheduler in every namespace of labelSetNamespaces?",
					"plugin", Name, "resource", labelsv1alpha1.Resource.String(), "labelSetNamespaces", x.namespaces)
			}
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s: NodePoolLabelSet informer did not sync: %w", Name, context.Cause(ctx))
	}
	logger.V(2).Info("NodePoolLabelSets synced", "plugin", Name, "sets", x.current().Len(), "labelSetNamespaces", x.namespaces)
	return nil
}

// handle feeds the index from informer.
func (x *labelSetIndex) handle(logger klog.Logger, informer cache.SharedIndexInformer) error {
	if err := informer.SetTransform(toLabelSet); err != nil {
		return err
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if set, ok := obj.(*labelsv1alpha1.NodePoolLabelSet); ok && x.upsert(logger, set) {
				x.informerChanged()
			}
		},
		UpdateFunc: func(_, obj any) {
			if set, ok := obj.(*labelsv1alpha1.NodePoolLabelSet); ok && x.upsert(logger, set) {
				x.informerChanged()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if set, ok := obj.(*labelsv1alpha1.NodePoolLabelSet); ok && x.remove(logger, set) {
				x.informerChanged()
			}
		},
	})
	return err
}

// toLabelSet converts informer objects to typed NodePoolLabelSets once, at the informer, so
// every reader sees typed objects. A set that does not convert (possible only if the CRD's
// schema was bypassed) is kept as an empty set with a log line rather than crashing.
func toLabelSet(obj any) (any, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		set, err := toLabelSet(d.Obj)
		return cache.DeletedFinalStateUnknown{Key: d.Key, Obj: set}, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return labelSetFromUnstructured(u), nil
}

func labelSetFromUnstructured(u *unstructured.Unstructured) *labelsv1alpha1.NodePoolLabelSet {
	set := &labelsv1alpha1.NodePoolLabelSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, set); err != nil {
		klog.Background().Error(err, "Malformed NodePoolLabelSet treated as having no labels", "plugin", Name, "labelSet", klog.KObj(u))
		set = &labelsv1alpha1.NodePoolLabelSet{}
		set.Namespace, set.Name, set.UID, set.Generation = u.GetNamespace(), u.GetName(), u.GetUID(), u.GetGeneration()
	}
	return set
}

// asLabelSet reads the objects the scheduler hands to queueing hints.
func asLabelSet(obj any) *labelsv1alpha1.NodePoolLabelSet {
	switch o := obj.(type) {
	case *labelsv1alpha1.NodePoolLabelSet:
		return o
	case *unstructured.Unstructured:
		return labelSetFromUnstructured(o)
	case cache.DeletedFinalStateUnknown:
		return asLabelSet(o.Obj)
	}
	return nil
}
