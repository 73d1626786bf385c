package integration

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/domainspread"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestStateFollowsInformersWhileNoPodWaits: the scheduler calls queueing hints once per waiting
// pod, and not at all when no pod waits, so plugin state must follow the informers on its own.
// Label sets change and replicas are deleted while no pod is pending; a pod that arrives after
// that is judged by the new state.
func TestStateFollowsInformersWhileNoPodWaits(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client

	profile := util.LoadShippedConfig(t).Profiles[0]
	util.PluginArgs(t, &profile, nodepoolready.Name).(*config.NodePoolReadyArgs).RequiredLabelKeys = nil
	spread := util.PluginArgs(t, &profile, domainspread.Name).(*config.DomainSpreadArgs)
	spread.Mode, spread.MaxSkew = config.SpreadHard, 1
	util.StartScheduler(t, cp, profile)

	labelSetNS := util.CreateNamespace(tCtx, t, cs, "labelsets")
	ns := util.CreateNamespace(tCtx, t, cs, "pods")
	pin := func(name, node string) {
		util.CreatePod(tCtx, t, cs, util.Pod(ns, name).NodeSelector(map[string]string{v1.LabelHostname: node}).Obj())
	}

	t.Run("NodePoolLabelSet changes", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot", "example.com/a": "1"}).Obj())
		// Not ready by the first version of the set: a pod waits, so the change is known.
		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "spot", map[string]string{"example.com/a": "2"}))
		pin("before", "spot-0")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "before", pool.LabelsNotApplied.String(), bindTimeout)
		if err := cs.CoreV1().Pods(ns).Delete(tCtx, "before", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		util.WaitForPods(tCtx, t, cs, ns, bindTimeout, func(pods []v1.Pod) (bool, error) { return len(pods) == 0, nil })

		// No pod waits while the set changes to what the node carries: the next pod binds.
		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "spot", map[string]string{"example.com/a": "1"}))
		pin("after-change", "spot-0")
		util.WaitForPodBound(tCtx, t, cs, ns, "after-change", bindTimeout)

		// And back: the next pod is refused with the new wanted value.
		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "spot", map[string]string{"example.com/a": "3"}))
		pin("after-second-change", "spot-0")
		msg := util.WaitForPodUnschedulable(tCtx, t, cs, ns, "after-second-change", pool.LabelsNotApplied.String(), bindTimeout)
		t.Logf("refused: %s", msg)

		// The set is deleted while no other pod waits: the waiting pod binds, and so does a new one.
		util.DeleteLabelSet(tCtx, t, cp, labelSetNS, "spot")
		util.WaitForPodBound(tCtx, t, cs, ns, "after-second-change", bindTimeout)
		pin("after-delete", "spot-0")
		util.WaitForPodBound(tCtx, t, cs, ns, "after-delete", bindTimeout)
	})

	t.Run("replicas deleted", func(t *testing.T) {
		// Zone a's node takes no pods (Fit refuses it) but is still an eligible domain, so with
		// maxSkew 1 a replica fits in zone b only while zone b holds none.
		util.CreateNode(tCtx, t, cs, util.Node("spread-a", map[string]string{"topology.kubernetes.io/zone": "a"}).
			Capacity(map[v1.ResourceName]string{v1.ResourcePods: "0", v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi"}).Obj())
		util.CreateNode(tCtx, t, cs, util.Node("spread-b", map[string]string{"topology.kubernetes.io/zone": "b"}).Obj())
		spreadNS := util.CreateNamespace(tCtx, t, cs, "spread")
		rs := createReplicaSet(tCtx, t, cs, spreadNS, "web", 3)
		replica := func(name, node string) *v1.Pod {
			// Kept to the two zones' nodes (the other tests' nodes are no domains of theirs).
			pod := util.Pod(spreadNS, name).Labels(rs.Spec.Template.Labels).Node(node).
				NodeAffinityIn("topology.kubernetes.io/zone", []string{"a", "b"}, st.NodeSelectorTypeMatchExpressions).Obj()
			pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
			return pod
		}
		for i := range 2 {
			util.CreatePod(tCtx, t, cs, replica(fmt.Sprintf("old-%d", i), "spread-b"))
		}
		// A replica now is refused: zone b holds two, zone a none.
		util.CreatePod(tCtx, t, cs, replica("refused", ""))
		util.WaitForPodUnschedulable(tCtx, t, cs, spreadNS, "refused", domainspread.ErrReasonSkew, bindTimeout)
		if err := cs.CoreV1().Pods(spreadNS).Delete(tCtx, "refused", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		util.WaitForPods(tCtx, t, cs, spreadNS, bindTimeout, func(pods []v1.Pod) (bool, error) { return len(pods) == 2, nil })

		// Both replicas go away while no replica is pending: the next one fits in zone b.
		for i := range 2 {
			if err := cs.CoreV1().Pods(spreadNS).Delete(tCtx, fmt.Sprintf("old-%d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
		util.WaitForPods(tCtx, t, cs, spreadNS, bindTimeout, func(pods []v1.Pod) (bool, error) { return len(pods) == 0, nil })
		util.CreatePod(tCtx, t, cs, replica("new", ""))
		if node := util.WaitForPodBound(tCtx, t, cs, spreadNS, "new", bindTimeout); node != "spread-b" {
			t.Errorf("bound to %s, want spread-b", node)
		}
	})
}
