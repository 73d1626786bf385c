package nodepoolready

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

// activator records Activate calls; the rest of the Handle is unused here.
type activator struct {
	framework.Handle
	activated []string
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for k := range pods {
		a.activated = append(a.activated, k)
	}
}

func TestInformerChangeRetriesWaitingPods(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, defaultArgs())
	h := &activator{}
	pl.handle = h
	pl.labelSets.onInformerChange = func() { pl.activateWaiting(logger) }

	pod := st.MakePod().Namespace("default").Name("waiting").Obj()
	if _, status := pl.PostFilter(ctx, framework.NewCycleState(), pod, nil); status.IsSuccess() {
		t.Fatal("PostFilter claimed to make the pod schedulable")
	}
	// A status-only change does not retry anything; a label change does, once.
	set := labelSet("ns", "spot", "u1", 1, map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"})
	if pl.labelSets.upsert(logger, set) {
		pl.labelSets.informerChanged()
	}
	if diff := cmp.Diff([]string{"default/waiting"}, h.activated); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
	h.activated = nil
	if pl.labelSets.upsert(logger, set) {
		pl.labelSets.informerChanged()
	}
	pl.activateWaiting(logger)
	if len(h.activated) != 0 {
		t.Errorf("pods activated twice: %v", h.activated)
	}
}
