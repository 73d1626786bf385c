package nodepoolready

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Event reasons: a set the gate does not read, and a pool labelled from one.
const (
	ReasonLabelSetNotRead    = "LabelSetNotRead"
	ReasonLabelSetNotVisible = "LabelSetNotVisible"
)

// unreadSets reports NodePoolLabelSets in namespaces outside labelSetNamespaces: the gate does
// not judge nodes by their labels, but a set there is evidence its pool is labelled by someone
// (the nodepool-labels-operator of an install pointed at the wrong namespace), so the pool's
// unlabelled nodes are held from the first (onChange), never judged by the set's labels. It
// watches the sets' metadata only, in every namespace: a Warning event on each such set naming
// the command that reads it, a gauge per namespace and a log line.
type unreadSets struct {
	watches    func(namespace string) bool
	namespaces []string
	recorder   func() events.EventRecorder

	// onChange gets, on every change, the pools with sets here and their namespaces: the gate
	// holds such a pool's unlabelled nodes (pool.LabelSets.WithUnreadSets).
	onChange func(map[string][]string)

	mu     sync.Mutex
	sets   map[types.UID]types.NamespacedName
	warned map[types.UID]struct{}
}

func newUnreadSets(namespaces []string, watches func(string) bool, recorder func() events.EventRecorder) *unreadSets {
	return &unreadSets{watches: watches, namespaces: namespaces, recorder: recorder,
		sets: map[types.UID]types.NamespacedName{}, warned: map[types.UID]struct{}{}}
}

// start runs the metadata informer; it does not wait for it: reporting may lag, scheduling may
// not. Without permission to list sets cluster-wide, client-go's reflector logs the refusal and
// retries with backoff; nothing else depends on it.
func (u *unreadSets) start(ctx context.Context, cfg *rest.Config) error {
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: building a metadata client: %w", Name, err)
	}
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	informer := factory.ForResource(labelsv1alpha1.Resource).Informer()
	logger := klog.FromContext(ctx)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { u.put(logger, obj) },
		UpdateFunc: func(_, obj any) { u.put(logger, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				u.remove(m.UID)
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	return nil
}

func (u *unreadSets) put(logger klog.Logger, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || u.watches(m.Namespace) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sets[m.UID] = types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	u.publishLocked()
	if _, done := u.warned[m.UID]; done {
		return
	}
	u.warned[m.UID] = struct{}{}
	msg := fmt.Sprintf("pool-scheduler does not read NodePoolLabelSets of namespace %s (labelSetNamespaces: %s): "+
		"nodes of pool %s are held until a labeler labels them (managed-labels annotation), never judged by these labels; "+
		"to read them: helm upgrade pool-scheduler manifests/charts/pool-scheduler -n pool-scheduler --reuse-values --set 'labelSets.namespaces={%s,%s}' (docs/gate.md)",
		m.Namespace, strings.Join(u.namespaces, ","), m.Name, strings.Join(u.namespaces, ","), m.Namespace)
	logger.Error(nil, "NodePoolLabelSet outside labelSetNamespaces is not read", "plugin", Name,
		"labelSet", klog.KObj(m), "labelSetNamespaces", u.namespaces)
	if r := u.recorder(); r != nil {
		ref := &v1.ObjectReference{APIVersion: labelsv1alpha1.SchemeGroupVersion.String(), Kind: "NodePoolLabelSet",
			Namespace: m.Namespace, Name: m.Name, UID: m.UID}
		r.Eventf(ref, nil, v1.EventTypeWarning, ReasonLabelSetNotRead, "Scheduling", "%s", msg)
	}
}

func (u *unreadSets) remove(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.sets[uid]; ok {
		delete(u.sets, uid)
		delete(u.warned, uid)
		u.publishLocked()
	}
}

func (u *unreadSets) publishLocked() {
	byNamespace := map[string]int{}
	byPool := map[string][]string{}
	for _, s := range u.sets {
		byNamespace[s.Namespace]++
		if !slices.Contains(byPool[s.Name], s.Namespace) {
			byPool[s.Name] = append(byPool[s.Name], s.Namespace)
		}
	}
	for _, ns := range byPool {
		slices.Sort(ns)
	}
	if u.onChange != nil {
		u.onChange(byPool)
	}
	unreadLabelSets.Reset()
	for ns, n := range byNamespace {
		unreadLabelSets.WithLabelValues(ns).Set(float64(n))
	}
}

// notVisibleReporter returns the index's onNotVisible: a Warning event on the node that showed a
// pool labelled from a set not in view, and a log line.
func notVisibleReporter(logger klog.Logger, namespaces []string, recorder func() events.EventRecorder) func([]string, string) {
	where := "labelSetNamespaces: " + strings.Join(namespaces, ",")
	if len(namespaces) == 0 {
		where = "every namespace is read"
	}
	return func(pools []string, node string) {
		for _, p := range pools {
			msg := fmt.Sprintf("nodes of pool %s carry labels a labeler applied (annotation %s), but no NodePoolLabelSet %s is read (%s): "+
				"the pool's nodes without them are held until labelled; point labelSetNamespaces at the set's namespace (docs/gate.md)",
				p, pool.ManagedLabelsAnnotation, p, where)
			logger.Error(nil, "Pool is labelled from a NodePoolLabelSet the scheduler does not read", "plugin", Name, "pool", p, "node", node)
			if r := recorder(); r != nil && node != "" {
				ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)}
				r.Eventf(ref, nil, v1.EventTypeWarning, ReasonLabelSetNotVisible, "Scheduling", "%s", msg)
			}
		}
	}
}
