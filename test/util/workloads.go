package util

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/kubesim"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper"
)

// Cell is where a node sits in a spread topology: the shipped DomainSpread dimensions' values.
type Cell struct{ Zone, UpdateDomain, Host string }

// SpreadTopology is a cluster laid out as the shipped profile's DomainSpread dimensions expect:
// node name -> its zone (topology.kubernetes.io/zone), update domain
// (topology.pool-scheduler.io/update-domain) and host (kubernetes.io/hostname).
type SpreadTopology map[string]Cell

// CreateSpreadNodes creates zones x updateDomains x hosts nodes of one pool and returns their cells.
func CreateSpreadNodes(ctx context.Context, t testing.TB, cs kubernetes.Interface, zones, updateDomains, hosts int) SpreadTopology {
	t.Helper()
	topo := SpreadTopology{}
	for z := 0; z < zones; z++ {
		for ud := 0; ud < updateDomains; ud++ {
			for h := 0; h < hosts; h++ {
				name := fmt.Sprintf("z%d-ud%d-h%d", z, ud, h)
				cell := Cell{Zone: fmt.Sprintf("zone-%d", z), UpdateDomain: fmt.Sprint(ud), Host: name}
				topo[name] = cell
				CreateNode(ctx, t, cs, Node(name, map[string]string{
					"kubernetes.azure.com/agentpool": "user",
					v1.LabelTopologyZone:             cell.Zone,
					configv1.UpdateDomainLabelKey:    cell.UpdateDomain,
				}).Obj())
			}
		}
	}
	return topo
}

// Spread is where a workload's pods sit, counted per zone, update domain and host, and per
// zone/update-domain cell.
type Spread struct {
	Zones, UpdateDomains, Hosts map[string]int
	// Cells counts the pods per zone/update-domain pair.
	Cells map[[2]string]int
	Pods  int
}

// SpreadOf counts the bound pods among pods; unbound and terminating pods are left out.
func (topo SpreadTopology) SpreadOf(pods []v1.Pod) Spread {
	s := Spread{Zones: map[string]int{}, UpdateDomains: map[string]int{}, Hosts: map[string]int{}, Cells: map[[2]string]int{}}
	// Every domain counts, empty ones included: skew is against the least loaded domain.
	for _, c := range topo {
		s.Zones[c.Zone] += 0
		s.UpdateDomains[c.UpdateDomain] += 0
		s.Hosts[c.Host] += 0
		s.Cells[[2]string{c.Zone, c.UpdateDomain}] += 0
	}
	for _, p := range pods {
		c, ok := topo[p.Spec.NodeName]
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		s.Pods++
		s.Zones[c.Zone]++
		s.UpdateDomains[c.UpdateDomain]++
		s.Hosts[c.Host]++
		s.Cells[[2]string{c.Zone, c.UpdateDomain}]++
	}
	return s
}

// DoubledHosts names the hosts holding two or more pods while another host holds none: with no
// more replicas than hosts, a spread that keeps every dimension balanced never leaves that (a
// zone/update-domain cell of 2 hosts holding 3 replicas while another cell holds 1 does).
func (topo SpreadTopology) DoubledHosts(s Spread) []string {
	empty := false
	for host := range topo {
		empty = empty || s.Hosts[host] == 0
	}
	var out []string
	for host := range topo {
		if s.Hosts[host] >= 2 && empty {
			out = append(out, host)
		}
	}
	sort.Strings(out)
	return out
}

// String prints the counts per cell, a zone per row, for failure messages.
func (s Spread) String() string {
	var zones, uds []string
	for z := range s.Zones {
		zones = append(zones, z)
	}
	for ud := range s.UpdateDomains {
		uds = append(uds, ud)
	}
	sort.Strings(zones)
	sort.Strings(uds)
	var b strings.Builder
	fmt.Fprintf(&b, "%d pods; zones %v, update domains %v; per cell:", s.Pods, s.Zones, s.UpdateDomains)
	for _, z := range zones {
		fmt.Fprintf(&b, "\n  %s:", z)
		for _, ud := range uds {
			fmt.Fprintf(&b, " %d", s.Cells[[2]string{z, ud}])
		}
	}
	return b.String()
}

// StartReplicaSetController runs the upstream ReplicaSet controller in process against the
// control plane (kubesim.StartReplicaSetController). It stops with the test.
func StartReplicaSetController(t testing.TB, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kubesim.StartReplicaSetController(ctx, cp)
}

// StartKubelet plays every node's kubelet for the test's pods (kubesim.StartKubelet): bound pods
// become Running and Ready at once, pods deleted with a grace period are removed. It stops with
// the test.
func StartKubelet(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := kubesim.StartKubelet(ctx, cs, kubesim.KubeletOptions{Logf: t.Logf}); err != nil {
		t.Fatal(err)
	}
}

// ReplicaSet builds a ReplicaSet of pause pods for pool-scheduler, selected by app=name.
func ReplicaSet(namespace, name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					SchedulerName:                 SchedulerName,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}}}},
				},
			},
		},
	}
}

// ScaleReplicaSet sets the ReplicaSet's replicas.
func ScaleReplicaSet(ctx context.Context, t testing.TB, cs kubernetes.Interface, namespace, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := cs.AppsV1().ReplicaSets(namespace).Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling ReplicaSet %s/%s to %d: %v", namespace, name, replicas, err)
	}
}

// WaitForReplicas waits until the namespace holds exactly n pods with label app=name, every one
// bound, Running and Ready and none terminating, and returns them.
func WaitForReplicas(ctx context.Context, t testing.TB, cs kubernetes.Interface, namespace, name string, n int, timeout time.Duration) []v1.Pod {
	t.Helper()
	var last []v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, nil
		}
		last = list.Items
		if len(last) != n {
			return false, nil
		}
		for i := range last {
			if last[i].DeletionTimestamp != nil || !podutil.IsPodReady(&last[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		ready := 0
		for i := range last {
			if podutil.IsPodReady(&last[i]) {
				ready++
			}
		}
		t.Fatalf("%s/%s: %d pods (%d ready), want %d ready within %v", namespace, name, len(last), ready, n, timeout)
	}
	return last
}

// StartDeletionCostKeeper runs the deletion-cost keeper in process for the shipped profile, as
// `pool-labeler spread` runs it (defaults but a short settle time), and returns it. It stops
// with the test.
func StartDeletionCostKeeper(t *testing.T, cp *controlplane.ControlPlane) *spreadkeeper.Keeper {
	t.Helper()
	args, ok := PluginArgs(t, &LoadShippedConfig(t).Profiles[0], "DomainSpread").(*config.DomainSpreadArgs)
	if !ok {
		t.Fatal("the shipped profile has no DomainSpread args")
	}
	k, err := spreadkeeper.NewKeeper(cp.Client, nil, spreadkeeper.KeeperOptions{
		SchedulerName: SchedulerName, Spread: args, QPS: 20, Burst: 40, Settle: 200 * time.Millisecond, Workers: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	go func() {
		if err := k.Run(ctx); err != nil {
			t.Errorf("deletion-cost keeper: %v", err)
		}
	}()
	return k
}

// WaitForDeletionCosts waits until the keeper has handled every change it saw and every pod with
// label app=name carries a deletion cost.
func WaitForDeletionCosts(ctx context.Context, t testing.TB, cs kubernetes.Interface, k *spreadkeeper.Keeper, namespace, name string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if _, ok := p.Annotations[spread.DeletionCostAnnotation]; !ok && p.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return k.Idle(), nil
	})
	if err != nil {
		t.Fatalf("%s/%s: deletion costs not kept within %v", namespace, name, timeout)
	}
}

// StartDisruptionController runs the upstream disruption controller in process
// (kubesim.StartDisruptionController), so PodDisruptionBudgets get the status the Eviction API
// decides by. It stops with the test.
func StartDisruptionController(t testing.TB, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := kubesim.StartDisruptionController(ctx, cp); err != nil {
		t.Fatal(err)
	}
}
