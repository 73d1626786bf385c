package handoff

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// SwitchWatch reads the hand-off controller's verdict from its switch, for components in other
// processes that must hold back while pool-scheduler is degraded (the rebalancer): the one
// verdict the controller publishes, never judged again on their own. It watches the one
// ConfigMap (get, list and watch on that name are all it needs).
type SwitchWatch struct {
	name     types.NamespacedName
	informer cache.SharedIndexInformer
}

// NewSwitchWatch watches the switch name; Run starts it.
func NewSwitchWatch(cs kubernetes.Interface, name types.NamespacedName) *SwitchWatch {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(name.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name.Name).String()
		}))
	return &SwitchWatch{name: name, informer: factory.Core().V1().ConfigMaps().Informer()}
}

// Run watches until ctx ends.
func (w *SwitchWatch) Run(ctx context.Context) error {
	w.informer.Run(ctx.Done())
	return nil
}

// Degraded returns why pool-scheduler is degraded by the switch, or "" while the switch hands
// pods over. A switch not read yet, missing, or holding anything but "true" is degraded: a
// component that holds back on this errs on the side of doing nothing.
func (w *SwitchWatch) Degraded() string {
	if !w.informer.HasSynced() {
		return fmt.Sprintf("the hand-off switch %s is not read yet", w.name)
	}
	obj, ok, err := w.informer.GetIndexer().GetByKey(w.name.String())
	if err != nil || !ok {
		return fmt.Sprintf("the hand-off switch %s is missing (is the hand-off controller installed?)", w.name)
	}
	cm := obj.(*v1.ConfigMap)
	if cm.Data[SwitchKey] == "true" {
		return ""
	}
	if why := cm.Data[SwitchReasonKey]; why != "" {
		return "the hand-off controller judges pool-scheduler degraded: " + why
	}
	return fmt.Sprintf("the hand-off switch %s says %s=%q", w.name, SwitchKey, cm.Data[SwitchKey])
}

// Following is the verdict of a way in that follows the hand-off controller (the webhook): the
// Lease, judged here (it expires within its duration even while the controller is down), and
// the controller's switch for whether the leader schedules (its heartbeat, Progress). A switch
// that is missing (no hand-off controller installed) or not read yet leaves the Lease alone to
// tell, as without the controller. wedged, when set, is called with whether the switch holds
// pods back while the Lease is healthy.
func Following(lease *LeaseWatch, sw *SwitchWatch, wedged func(bool)) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		ok, why := lease.Healthy(ctx)
		held := false
		if ok && sw.present() {
			why = sw.Degraded()
			ok, held = why == "", why != ""
		}
		if wedged != nil {
			wedged(held)
		}
		return ok, why
	}
}

// present reports whether the switch was read and exists.
func (w *SwitchWatch) present() bool {
	if !w.informer.HasSynced() {
		return false
	}
	_, ok, err := w.informer.GetIndexer().GetByKey(w.name.String())
	return err == nil && ok
}
