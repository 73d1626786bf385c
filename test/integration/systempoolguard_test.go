package integration

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/systempoolguard"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestSystemPoolGuard: a system pool that can only carry a PreferNoSchedule taint (AKS, marked
// by AKS's system-mode label) or is marked by its pool name (Banzai), beside a small user pool. User pods, some with a wildcard
// toleration, never land on system nodes, even when the user pool is full; system pods land and
// prefer the system pool.
func TestSystemPoolGuard(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client

	// The shipped profile as is: a stock AKS system-mode pool (pool name sysnp, not "system") is
	// recognised by its kubernetes.azure.com/mode label without configuration.
	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])

	soft := []v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}}
	systemNodes := map[string]bool{"aks-system-0": true, "banzai-system-0": true}
	util.CreateNode(tCtx, t, cs, util.Node("aks-system-0", map[string]string{
		"kubernetes.azure.com/agentpool": "sysnp", "kubernetes.azure.com/mode": "system",
	}).Taints(soft).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("banzai-system-0", map[string]string{"nodepool.banzaicloud.io/name": "system"}).Obj())
	for i := 0; i < 2; i++ {
		// Room for 3 pods each: the user pool fills up.
		n := util.Node(fmt.Sprintf("user-%d", i), map[string]string{
			"kubernetes.azure.com/agentpool": "user", "kubernetes.azure.com/mode": "user",
		}).Obj()
		n.Status.Capacity[v1.ResourcePods] = resource.MustParse("3")
		n.Status.Allocatable = n.Status.Capacity
		util.CreateNode(tCtx, t, cs, n)
	}

	// System pods first, while the user pool has room: they must still choose the system pool.
	appNS := util.CreateNamespace(tCtx, t, cs, "apps")
	ingressNS := util.CreateNamespace(tCtx, t, cs, "ingress")
	var systemPods []*v1.Pod
	for i := 0; i < 3; i++ {
		systemPods = append(systemPods, util.Pod("kube-system", fmt.Sprintf("addon-%d", i)).Obj())
	}
	for i := 0; i < 2; i++ {
		p := util.Pod(ingressNS, fmt.Sprintf("critical-%d", i)).Obj()
		p.Spec.PriorityClassName = "system-cluster-critical"
		systemPods = append(systemPods, p)
	}
	for _, p := range systemPods {
		util.CreatePod(tCtx, t, cs, p)
		node := util.WaitForPodBound(tCtx, t, cs, p.Namespace, p.Name, bindTimeout)
		if !systemNodes[node] {
			t.Errorf("system pod %s/%s on user node %s, want the system pool", p.Namespace, p.Name, node)
		}
	}

	// Eight user pods for six free slots; every other one carries a wildcard toleration.
	const userPods = 8
	for i := 0; i < userPods; i++ {
		p := util.Pod(appNS, fmt.Sprintf("web-%d", i)).Obj()
		if i%2 == 1 {
			p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
		}
		util.CreatePod(tCtx, t, cs, p)
	}
	neverOnSystem := func(pods []v1.Pod) error {
		for _, p := range pods {
			if systemNodes[p.Spec.NodeName] {
				return fmt.Errorf("user pod %s landed on system node %s", p.Name, p.Spec.NodeName)
			}
		}
		return nil
	}
	var bound, pending int
	pods := util.WaitForPods(tCtx, t, cs, appNS, bindTimeout, func(pods []v1.Pod) (bool, error) {
		bound, pending = 0, 0
		for i := range pods {
			switch {
			case pods[i].Spec.NodeName != "":
				bound++
			case util.UnschedulableWith(&pods[i], systempoolguard.ErrReasonSystemPool):
				pending++
			}
		}
		return bound == 6 && pending == 2, neverOnSystem(pods)
	})
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			t.Logf("pending %s: %s", p.Name, util.PodScheduledMessage(tCtx, cs, appNS, p.Name))
		}
	}

	// Room in the user pool: the pending user pods bind there, still not on the system pool.
	util.CreateNode(tCtx, t, cs, util.Node("user-2", map[string]string{"kubernetes.azure.com/agentpool": "user"}).Obj())
	util.WaitForPods(tCtx, t, cs, appNS, bindTimeout, func(pods []v1.Pod) (bool, error) {
		onNew := 0
		for _, p := range pods {
			if p.Spec.NodeName == "user-2" {
				onNew++
			}
		}
		return onNew == 2, neverOnSystem(pods)
	})
}
