package integration

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	shipped "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

const (
	// On AKS availability sets (VMs outside zones) cloud-provider-azure writes the platform fault
	// domain into the zone label.
	faultDomainKey = "topology.kubernetes.io/zone"
	// pool-labeler's fault-domain label.
	fdLabelKey    = "topology.pool-scheduler.io/fault-domain"
	holdFinalizer = "pool-scheduler.io/test-hold"
)

// TestDomainSpread is the field report's cluster scaled up: 24 nodes = 2 fault domains x 3 update
// domains x 4 hosts, and 300 ReplicaSets of 2..6 replicas created pod by pod under the shipped
// profile (pods carry no spread rules). Every set must end with per-dimension skew <= 1, so no set
// of two or more replicas is confined to one fault or update domain; and again for sets whose old
// pods are left terminating while a new ReplicaSet replaces them.
func TestDomainSpread(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])

	topo := map[string][3]string{} // node -> fault domain, update domain, host
	for fd := 0; fd < 2; fd++ {
		for ud := 0; ud < 3; ud++ {
			for h := 0; h < 4; h++ {
				name := fmt.Sprintf("aks-fd%d-ud%d-%d", fd, ud, h)
				topo[name] = [3]string{fmt.Sprint(fd), fmt.Sprint(ud), name}
				util.CreateNode(tCtx, t, cs, util.Node(name, map[string]string{
					"kubernetes.azure.com/agentpool": "nodepool1",
					faultDomainKey:                   fmt.Sprint(fd),
					updateDomainKey:                  fmt.Sprint(ud),
				}).Obj())
			}
		}
	}
	ns := util.CreateNamespace(tCtx, t, cs, "spread")

	rng := rand.New(rand.NewSource(1))
	sets := map[string]int{}
	var names []string
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("web-%03d", i)
		sets[name] = 2 + rng.Intn(5)
		names = append(names, name)
	}
	// Replaced sets keep their old pods terminating (a finalizer holds them).
	replaced := map[string]bool{}
	for _, name := range names[:10] {
		replaced[name] = true
	}
	owners := map[string]*appsv1.ReplicaSet{}
	for _, name := range names {
		owners[name] = createReplicaSet(tCtx, t, cs, ns, name, sets[name])
	}
	// Pod by pod, interleaving sets as a cluster under load would.
	total := 0
	for round := 0; round < 6; round++ {
		for _, name := range names {
			if round < sets[name] {
				createReplica(tCtx, t, cs, owners[name], round, replaced[name])
				total++
			}
		}
	}
	util.WaitAllBound(tCtx, t, cs, ns, total, 3*time.Minute)
	report := checkSpread(tCtx, t, cs, ns, owners, topo)
	t.Logf("300 ReplicaSets, %d pods:\n%s", total, report)

	// Roll the replaced sets: old pods deleted (left terminating), new ReplicaSet, same name.
	for name := range replaced {
		pods, err := cs.CoreV1().Pods(ns).List(tCtx, metav1.ListOptions{LabelSelector: "set=" + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if err := cs.CoreV1().Pods(ns).Delete(tCtx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.AppsV1().ReplicaSets(ns).Delete(tCtx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	newOwners := map[string]*appsv1.ReplicaSet{}
	newTotal := 0
	for name := range replaced {
		newOwners[name] = createReplicaSet(tCtx, t, cs, ns, name, sets[name])
		for r := 0; r < sets[name]; r++ {
			createReplica(tCtx, t, cs, newOwners[name], r+100, false)
			newTotal++
		}
	}
	util.WaitAllBound(tCtx, t, cs, ns, total+newTotal, 3*time.Minute)
	report = checkSpread(tCtx, t, cs, ns, newOwners, topo)
	t.Logf("10 ReplicaSets recreated beside their terminating pods:\n%s", report)
}

func createReplicaSet(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, ns, name string, replicas int) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"set": name}
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{SchedulerName: util.SchedulerName, Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ReplicaSet %s: %v", name, err)
	}
	return rs
}

// createReplica creates a pod as the ReplicaSet controller would (no controller runs here).
func createReplica(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, rs *appsv1.ReplicaSet, i int, hold bool) {
	t.Helper()
	pod := util.Pod(rs.Namespace, fmt.Sprintf("%s-%s-%d", rs.Name, rs.UID[:5], i)).Labels(rs.Spec.Template.Labels).Obj()
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	if hold {
		pod.Finalizers = []string{holdFinalizer}
	}
	util.CreatePod(tCtx, t, cs, pod)
}

// checkSpread fails the test for any set with skew > 1 on a dimension or, with two or more
// replicas, confined to one fault or update domain; it returns a summary of what it measured.
func checkSpread(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, ns string, owners map[string]*appsv1.ReplicaSet, topo map[string][3]string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	domains := [3][]string{}
	for _, d := range topo {
		for i := range d {
			domains[i] = append(domains[i], d[i])
		}
	}
	for i := range domains {
		sort.Strings(domains[i])
		domains[i] = compact(domains[i])
	}
	counts := map[types.UID]*[3]map[string]int{}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if p.DeletionTimestamp != nil || ref == nil {
			continue
		}
		c := counts[ref.UID]
		if c == nil {
			c = &[3]map[string]int{{}, {}, {}}
			counts[ref.UID] = c
		}
		for i, v := range topo[p.Spec.NodeName] {
			c[i][v]++
		}
	}
	dimNames := [3]string{"fault domain", "update domain", "host"}
	var skewHist [3]map[int]int
	for i := range skewHist {
		skewHist[i] = map[int]int{}
	}
	confined := [2]int{}
	udPattern := map[string]int{}
	for name, rs := range owners {
		c := counts[rs.UID]
		if c == nil {
			t.Errorf("set %s has no running replicas", name)
			continue
		}
		replicas := int(*rs.Spec.Replicas)
		for i := range dimNames {
			lo, hi := replicas, 0
			for _, d := range domains[i] {
				lo, hi = min(lo, c[i][d]), max(hi, c[i][d])
			}
			skewHist[i][hi-lo]++
			if hi-lo > 1 {
				t.Errorf("set %s (%d replicas): %s skew %d: %v", name, replicas, dimNames[i], hi-lo, c[i])
			}
			if i < 2 && replicas >= 2 && len(c[i]) == 1 {
				confined[i]++
				t.Errorf("set %s (%d replicas) confined to one %s: %v", name, replicas, dimNames[i], c[i])
			}
		}
		var ud []string
		for _, d := range domains[1] {
			ud = append(ud, fmt.Sprint(c[1][d]))
		}
		udPattern[fmt.Sprintf("%d replicas: ud %s", replicas, strings.Join(ud, "/"))]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  sets confined to one fault domain: %d, to one update domain: %d\n", confined[0], confined[1])
	for i, name := range dimNames {
		fmt.Fprintf(&b, "  %s skew histogram (skew: sets): %v\n", name, skewHist[i])
	}
	var patterns []string
	for p, n := range udPattern {
		patterns = append(patterns, fmt.Sprintf("%s x%d", p, n))
	}
	sort.Strings(patterns)
	fmt.Fprintf(&b, "  update-domain distributions: %s", strings.Join(patterns, "; "))
	return b.String()
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// TestDomainSpreadAzurePools runs the shipped profile on the kinds of pools AKS builds, in one
// cluster: a zonal scale-set pool (zone label westeurope-1..3, whose nodes also carry a
// fault-domain label repeating 0/1 in every zone, as an earlier pool-labeler wrote), an
// availability-set pool (the zone label holds the fault domain 0/1), and workloads kept to
// either pool or free to use both. Every ReplicaSet must end with skew <= 1 on zone, update
// domain and host over the domains of the pools it runs in, as the report (built from the
// shipped args) measures it: the repeating fault-domain values never stand for the zone.
func TestDomainSpreadAzurePools(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])

	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("aks-zonal-27255451-vmss%06d", i)
		node := util.Node(name, map[string]string{
			"kubernetes.azure.com/agentpool": "zonal",
			"topology.kubernetes.io/zone":    fmt.Sprintf("westeurope-%d", 1+i%3),
			fdLabelKey:                       fmt.Sprint(i / 3 % 2),
			updateDomainKey:                  fmt.Sprint(i / 6),
		}).Obj()
		util.CreateNode(tCtx, t, cs, node)
	}
	for i := 0; i < 12; i++ {
		fd := fmt.Sprint(i % 2)
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("aks-avset-27255451-%d", i), map[string]string{
			"kubernetes.azure.com/agentpool": "avset",
			"topology.kubernetes.io/zone":    fd,
			fdLabelKey:                       fd,
			updateDomainKey:                  fmt.Sprint(i / 2 % 3),
		}).Obj())
	}
	ns := util.CreateNamespace(tCtx, t, cs, "azure-pools")
	rng := rand.New(rand.NewSource(2))
	type set struct {
		rs   *appsv1.ReplicaSet
		pool string
	}
	var sets []set
	for i, pool := range []string{"zonal", "avset", ""} {
		for j := 0; j < 30; j++ {
			name := fmt.Sprintf("set-%d-%02d", i, j)
			sets = append(sets, set{rs: createReplicaSet(tCtx, t, cs, ns, name, 2+rng.Intn(5)), pool: pool})
		}
	}
	total := 0
	for round := 0; round < 6; round++ {
		for _, s := range sets {
			if round >= int(*s.rs.Spec.Replicas) {
				continue
			}
			pod := util.Pod(ns, fmt.Sprintf("%s-%d", s.rs.Name, round)).Labels(s.rs.Spec.Template.Labels).Obj()
			pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s.rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
			if s.pool != "" {
				pod.Spec.NodeSelector = map[string]string{"kubernetes.azure.com/agentpool": s.pool}
			}
			util.CreatePod(tCtx, t, cs, pod)
			total++
		}
	}
	util.WaitAllBound(tCtx, t, cs, ns, total, 3*time.Minute)

	args, err := profile.LoadArgs(shipped.Config, "")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := report.NewPolicy(args)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := report.Inputs{}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	r := report.Compute(in, policy)
	if len(r.Workloads) != len(sets) {
		t.Fatalf("%d workloads measured, want %d", len(r.Workloads), len(sets))
	}
	// A set kept to one pool must be within skew 1 on every dimension. A set free to use both
	// pools is held to zone and host: update domains of two pools (here 2 and 3 of them) are
	// unrelated maintenance schedules (Azure walks them per availability set or scale set), and
	// the zone, the first dimension, decides between the pools' nodes.
	weak := 0
	for _, w := range r.Workloads {
		both := strings.Contains(w.Name, "/set-2-")
		for d, dim := range r.Dimensions {
			if both && dim.Name == "update-domain" {
				continue
			}
			if w.Skew[d] > 1 || w.Confined[d] {
				weak++
				t.Errorf("%s (%d replicas): %s skew %d, confined %v: %v", w.Name, w.Replicas, dim.Name, w.Skew[d], w.Confined[d], w.Domains[d])
			}
		}
	}
	t.Logf("%d ReplicaSets (%d pods) on a zonal, an availability-set and both pools: %d weak; zonal replicas per zone of set-0-00: %v",
		len(sets), total, weak, r.Workloads[0].Domains[0])
}
