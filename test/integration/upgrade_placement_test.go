package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/google/go-cmp/cmp"

	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestUpgradePlacement: the shipped profile, mid-upgrade of a pool as AKS plays it, places a
// workload's replicas within each zone on the node the upgrade already reimaged (which AKS
// registered again under its name, so only the name says it predates the upgrade), one each,
// and not on the old nodes the upgrade drains next or the surge nodes it removes at its end.
func TestUpgradePlacement(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])
	util.StartReplicaSetController(t, cp)
	util.StartKubelet(t, cs)
	const oldImage, newImage = "AKSUbuntu-2204gen2containerd-202410.27.0", "AKSUbuntu-2204gen2containerd-202411.12.0"
	node := func(name string, zone int, image string) *v1.Node {
		n := util.Node(name, map[string]string{"kubernetes.azure.com/agentpool": "user", "topology.kubernetes.io/zone": fmt.Sprintf("westeurope-%d", zone),
			updateDomainKey: "0", maintenance.NodeImageVersionLabel: image}).Obj()
		n.Status.NodeInfo.KubeletVersion = "v1.34.10"
		return n
	}
	// Before the upgrade: four nodes per zone on the old image.
	for z := 1; z <= 3; z++ {
		for i := range 3 {
			util.CreateNode(tCtx, t, cs, node(fmt.Sprintf("z%d-old-%d", z, i), z, oldImage))
		}
		util.CreateNode(tCtx, t, cs, node(fmt.Sprintf("z%d-reimaged", z), z, oldImage))
	}
	// Creation times have a resolution of a second: the surge nodes come a second later, as
	// AKS adds them minutes after the pool's nodes joined.
	time.Sleep(1100 * time.Millisecond)
	for z := 1; z <= 3; z++ {
		util.CreateNode(tCtx, t, cs, node(fmt.Sprintf("z%d-surge", z), z, newImage))
	}
	// One node per zone is drained, deleted and registered again on the new image.
	for z := 1; z <= 3; z++ {
		name := fmt.Sprintf("z%d-reimaged", z)
		if err := cs.CoreV1().Nodes().Delete(tCtx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		util.CreateNode(tCtx, t, cs, node(name, z, newImage))
	}
	// The scheduler has the re-registered nodes once a pod pinned to each binds there.
	for z := 1; z <= 3; z++ {
		name := fmt.Sprintf("z%d-reimaged", z)
		util.CreatePod(tCtx, t, cs, util.Pod("default", "probe-"+name).SchedulerName(util.SchedulerName).NodeSelector(map[string]string{v1.LabelHostname: name}).Obj())
		util.WaitForPodBound(tCtx, t, cs, "default", "probe-"+name, time.Minute)
	}

	ns := util.CreateNamespace(tCtx, t, cs, "upgrade")
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, util.ReplicaSet(ns, "web", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, 2*time.Minute)
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
	}
	// Two per zone (DomainSpread's zone first); in each zone one on the reimaged node, the
	// other (its share of one reached) on a node without a replica.
	for z := 1; z <= 3; z++ {
		if got := perNode[fmt.Sprintf("z%d-reimaged", z)]; got != 1 {
			t.Errorf("zone %d: %d replicas on its reimaged node, want 1; placement %v", z, got, perNode)
		}
	}
	if diff := cmp.Diff(1, maxOf(perNode)); diff != "" {
		t.Errorf("replicas per node (-want +got max):\n%s\nplacement %v", diff, perNode)
	}
}

func maxOf(m map[string]int) int {
	out := 0
	for _, v := range m {
		out = max(out, v)
	}
	return out
}
