package spreadkeeper

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const zoneKey = "topology.kubernetes.io/zone"

// rebalanceCluster is what the rebalancer's informers hold: nodes n<zone><i> (two per zone),
// workloads' replicas, and other pods taking room.
type rebalanceCluster struct {
	nodes  []*v1.Node
	pods   []*v1.Pod
	others []*v1.Pod
}

func node(name, zone string) *st.NodeWrapper {
	return st.MakeNode().Name(name).Label(v1.LabelHostname, name).Label(zoneKey, zone).
		Capacity(map[v1.ResourceName]string{v1.ResourcePods: "110", v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi"})
}

// zones builds two nodes in each of zones a, b and c; edit changes the nodes of zone c.
func zones(edit func(*st.NodeWrapper) *st.NodeWrapper) []*v1.Node {
	var out []*v1.Node
	for _, z := range []string{"a", "b", "c"} {
		for i := range 2 {
			n := node(fmt.Sprintf("n%s%d", z, i), z)
			if z == "c" && edit != nil {
				n = edit(n)
			}
			out = append(out, n.Obj())
		}
	}
	return out
}

// replica is a Ready replica of ReplicaSet rs in namespace ns on nodeName.
func replica(ns, rs string, i int, nodeName string) *st.PodWrapper {
	return st.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", rs, i)).UID(fmt.Sprintf("%s-%s-%d", ns, rs, i)).
		SchedulerName("pool-scheduler").Node(nodeName).Phase(v1.PodRunning).Condition(v1.PodReady, v1.ConditionTrue, "").
		OwnerReference(rs, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).
		Container("pause").Req(map[v1.ResourceName]string{v1.ResourceCPU: "500m"}).
		CreationTimestamp(metav1.NewTime(time.Unix(int64(1000+i), 0)))
}

// skewed is a workload of 5 replicas, 3 in zone a and 2 in zone b (zone c empty: skew 3, and
// only zone c is 2 below zone a); edit changes each replica.
func skewed(ns, rs string, edit func(*st.PodWrapper) *st.PodWrapper) []*v1.Pod {
	var out []*v1.Pod
	for i, n := range []string{"na0", "na1", "na0", "nb0", "nb1"} {
		p := replica(ns, rs, i, n)
		if edit != nil {
			p = edit(p)
		}
		pod := p.Obj()
		// st's OwnerReference sets no UID and no controller flag; the workload needs both.
		pod.OwnerReferences[0].UID = types.UID(ns + "/" + rs)
		pod.OwnerReferences[0].Controller = ptr.To(true)
		out = append(out, pod)
	}
	return out
}

func newTestRebalancer(t *testing.T, c rebalanceCluster, o RebalanceOptions) *Rebalancer {
	t.Helper()
	var objs []runtime.Object
	for _, p := range c.pods {
		objs = append(objs, p)
	}
	k, err := NewKeeper(fake.NewClientset(objs...), nil, KeeperOptions{
		SchedulerName: "pool-scheduler", QPS: 1, Burst: 1, Workers: 1,
		Spread: &config.DomainSpreadArgs{MaxSkew: 1, Dimensions: []config.SpreadDimension{
			{Name: "zone", LabelKeys: []string{zoneKey}}, {Name: "host", LabelKeys: []string{v1.LabelHostname}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRebalancer(k, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if err := k.nodes.GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
		// What the node informer's handler does once it runs.
		r.nodeChanged(n)
	}
	for _, p := range c.pods {
		if err := k.pods.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append(append([]*v1.Pod{}, c.pods...), c.others...) {
		if err := r.all.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func options() RebalanceOptions {
	return RebalanceOptions{DryRun: true, Interval: time.Minute, Cooldown: 5 * time.Minute, MaxBackoff: time.Hour, MaxSkew: 1,
		MaxPerPass: 5, MaxPerNode: 1, MaxPerNamespace: 2}
}

// outcome is a Decision without the error and the skew: what the tables compare.
type outcome struct {
	Pod, Result, Reason string
	Backoff             time.Duration
}

func outcomes(ds []Decision) []outcome {
	var out []outcome
	for _, d := range ds {
		out = append(out, outcome{Pod: d.Pod, Result: d.Result, Reason: d.Reason, Backoff: d.Backoff})
	}
	return out
}

func mustSystemPolicy(t *testing.T) *pool.SystemPolicy {
	t.Helper()
	p, err := pool.NewSystemPolicy(&config.SystemPoolGuardArgs{
		PoolLabelKeys: []string{"agentpool"}, SystemPools: []string{"system"},
		SystemNamespaces: []string{"kube-system"}, SystemPriorityClasses: []string{"system-cluster-critical"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// pooled labels the named nodes with pools: pairs of node name and pool (agentpool, a default
// pool label key).
func pooled(nodes []*v1.Node, namePool ...string) []*v1.Node {
	for i := 0; i < len(namePool); i += 2 {
		for _, n := range nodes {
			if n.Name == namePool[i] {
				n.Labels["agentpool"] = namePool[i+1]
			}
		}
	}
	return nodes
}

// upgrading gives every node node image v1, and the named one v2: its pool (if it has one)
// runs two generations, which is an upgrade under way.
func upgrading(nodes []*v1.Node, newer string) []*v1.Node {
	for _, n := range nodes {
		n.Labels[maintenance.NodeImageVersionLabel] = "v1"
		if n.Name == newer {
			n.Labels[maintenance.NodeImageVersionLabel] = "v2"
		}
	}
	return nodes
}

// TestRebalancerDecisions: which replica a pass moves, or why it moves none, for a workload
// 3/1/0 over zones a, b, c (skew 3), against the descheduler's safeguards.
func TestRebalancerDecisions(t *testing.T) {
	filler := func(nodeName, cpu string) *v1.Pod {
		return st.MakePod().Namespace("other").Name("filler-" + nodeName).UID("filler-" + nodeName).Node(nodeName).
			Container("x").Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
	tests := []struct {
		name    string
		cluster rebalanceCluster
		edit    func(*RebalanceOptions)
		want    []outcome
	}{
		{
			name:    "room in zone c: the first replica of the removal order in zone a",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", nil)},
			want:    []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "zone c tainted NoSchedule, not tolerated: nothing evicted, backs off",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Taints([]v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}})
			}), pods: skewed("ns", "web", nil)},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipNoFit, Backoff: 5 * time.Minute}},
		},
		{
			name: "zone c tainted, the taint tolerated",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Taints([]v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}})
			}), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Toleration("dedicated")
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "zone c PreferNoSchedule: fits",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Taints([]v1.Taint{{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}})
			}), pods: skewed("ns", "web", nil)},
			want: []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "zone c full: its allocatable taken by other pods",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", nil),
				others: []*v1.Pod{filler("nc0", "3600m"), filler("nc1", "4")}},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipNoFit, Backoff: 5 * time.Minute}},
		},
		{
			name: "zone c has room on one node",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", nil),
				others: []*v1.Pod{filler("nc0", "3500m"), filler("nc1", "4")}},
			want: []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "zone c's pod slots used up",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Capacity(map[v1.ResourceName]string{v1.ResourcePods: "1", v1.ResourceCPU: "4"})
			}), pods: skewed("ns", "web", nil), others: []*v1.Pod{filler("nc0", "0"), filler("nc1", "0")}},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipNoFit, Backoff: 5 * time.Minute}},
		},
		{
			name: "zone c is a system pool: the pod is no system pod",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Label("agentpool", "system")
			}), pods: skewed("ns", "web", nil)},
			edit: func(o *RebalanceOptions) { o.System = mustSystemPolicy(t) },
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipNoFit, Backoff: 5 * time.Minute}},
		},
		{
			name: "zone c is a system pool, without SystemPoolGuard's policy",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Label("agentpool", "system")
			}), pods: skewed("ns", "web", nil)},
			want: []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "replicas pinned to zones a and b by required node affinity: zone c does not count (3/2)",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.NodeAffinityIn(zoneKey, []string{"a", "b"}, st.NodeSelectorTypeMatchExpressions)
			})},
		},
		{
			name:    "zone c cordoned: does not count (3/2)",
			cluster: rebalanceCluster{nodes: zones(func(n *st.NodeWrapper) *st.NodeWrapper { return n.Unschedulable(true) }), pods: skewed("ns", "web", nil)},
		},
		{
			name: "system-critical priority",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Priority(2000000000)
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipSystemCritical, Backoff: 5 * time.Minute}},
		},
		{
			name: "system pods by SystemPoolGuard (priority class)",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				p.Spec.PriorityClassName = "system-cluster-critical"
				return p
			})},
			edit: func(o *RebalanceOptions) { o.System = mustSystemPolicy(t) },
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipSystemPod, Backoff: 5 * time.Minute}},
		},
		{
			name:    "system pods by SystemPoolGuard (namespace)",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("kube-system", "web", nil)},
			edit:    func(o *RebalanceOptions) { o.System = mustSystemPolicy(t) },
			want:    []outcome{{Pod: "kube-system/web-2", Result: "skipped", Reason: SkipSystemPod, Backoff: 5 * time.Minute}},
		},
		{
			name: "emptyDir",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Volume(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipLocalStorage, Backoff: 5 * time.Minute}},
		},
		{
			name: "hostPath",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Volume(v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var"}}})
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipLocalStorage, Backoff: 5 * time.Minute}},
		},
		{
			name: "one replica opted out: the next one in zone a moves",
			cluster: rebalanceCluster{nodes: zones(nil), pods: func() []*v1.Pod {
				pods := skewed("ns", "web", nil)
				pods[2].Annotations = map[string]string{PreventEvictionAnnotation: ""}
				return pods
			}()},
			want: []outcome{{Pod: "ns/web-1", Result: "dry_run"}},
		},
		{
			name: "every replica opted out (the descheduler's key)",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Annotation(DeschedulerNoEvictionAnnotation, "true")
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipOptedOut, Backoff: 5 * time.Minute}},
		},
		{
			name: "every replica karpenter.sh/do-not-disrupt=true",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Annotation(KarpenterDoNotDisruptAnnotation, "true")
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipDoNotDisrupt, Backoff: 5 * time.Minute}},
		},
		{
			name: "every replica cluster-autoscaler.kubernetes.io/safe-to-evict=false",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Annotation(SafeToEvictAnnotation, "false")
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipDoNotDisrupt, Backoff: 5 * time.Minute}},
		},
		{
			name: "one replica do-not-disrupt, one safe-to-evict=false: the next one in zone a moves",
			cluster: rebalanceCluster{nodes: zones(nil), pods: func() []*v1.Pod {
				pods := skewed("ns", "web", nil)
				pods[2].Annotations = map[string]string{KarpenterDoNotDisruptAnnotation: "true"}
				pods[1].Annotations = map[string]string{SafeToEvictAnnotation: "false"}
				return pods
			}()},
			want: []outcome{{Pod: "ns/web-0", Result: "dry_run"}},
		},
		{
			name: "do-not-disrupt other than true, safe-to-evict true: no protection (as Karpenter and cluster-autoscaler read them)",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
				return p.Annotation(KarpenterDoNotDisruptAnnotation, "false").Annotation(SafeToEvictAnnotation, "true")
			})},
			want: []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "zone c's pool upgrades (its nodes run two node images): the workload may move there, nothing evicted, no backoff",
			cluster: rebalanceCluster{nodes: upgrading(zones(func(n *st.NodeWrapper) *st.NodeWrapper {
				return n.Label("agentpool", "pc")
			}), "nc1"), pods: skewed("ns", "web", nil)},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipPoolUpgrading}},
		},
		{
			name: "zone a's pool upgrades: the workload is on it",
			cluster: rebalanceCluster{nodes: upgrading(pooled(zones(nil), "na0", "pa", "na1", "pa"), "na1"),
				pods: skewed("ns", "web", nil)},
			want: []outcome{{Pod: "ns/web-2", Result: "skipped", Reason: SkipPoolUpgrading}},
		},
		{
			name: "a pool the workload neither is on nor may move to upgrades: it moves",
			cluster: rebalanceCluster{nodes: upgrading(append(pooled(zones(nil), "na0", "main", "na1", "main", "nb0", "main", "nb1", "main", "nc0", "main", "nc1", "main"),
				node("nd0", "d").Label("agentpool", "batch").Label(maintenance.NodeImageVersionLabel, "v1").Obj(),
				node("nd1", "d").Label("agentpool", "batch").Label(maintenance.NodeImageVersionLabel, "v1").Obj()), "nd1"),
				pods: skewed("ns", "web", func(p *st.PodWrapper) *st.PodWrapper {
					return p.NodeAffinityIn("agentpool", []string{"main"}, st.NodeSelectorTypeMatchExpressions)
				})},
			want: []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name:    "pool-scheduler degraded: the pass evicts nothing",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", nil)},
			edit:    func(o *RebalanceOptions) { o.Degraded = func() string { return "no healthy leader" } },
		},
		{
			name:    "pool-scheduler healthy",
			cluster: rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", nil)},
			edit:    func(o *RebalanceOptions) { o.Degraded = func() string { return "" } },
			want:    []outcome{{Pod: "ns/web-2", Result: "dry_run"}},
		},
		{
			name: "a replica not Ready: the workload waits",
			cluster: rebalanceCluster{nodes: zones(nil), pods: func() []*v1.Pod {
				pods := skewed("ns", "web", nil)
				pods[3].Status.Conditions = nil
				return pods
			}()},
		},
		{
			name:    "one per node per pass: two workloads crowding the same nodes",
			cluster: rebalanceCluster{nodes: zones(nil), pods: append(skewed("ns", "api", nil), skewed("ns2", "web", nil)...)},
			// ns2/web-2 sits on na0 like ns/api-2; web-1 (na1) moves instead.
			want: []outcome{{Pod: "ns/api-2", Result: "dry_run"}, {Pod: "ns2/web-1", Result: "dry_run"}},
		},
		{
			name:    "per namespace",
			cluster: rebalanceCluster{nodes: zones(nil), pods: append(skewed("ns", "api", nil), skewed("ns", "web", nil)...)},
			edit:    func(o *RebalanceOptions) { o.MaxPerNamespace, o.MaxPerNode = 1, 5 },
			want:    []outcome{{Pod: "ns/api-2", Result: "dry_run"}, {Pod: "ns/web-2", Result: "skipped", Reason: SkipLimitNamespace}},
		},
		{
			name:    "per pass",
			cluster: rebalanceCluster{nodes: zones(nil), pods: append(skewed("ns", "api", nil), skewed("ns2", "web", nil)...)},
			edit:    func(o *RebalanceOptions) { o.MaxPerPass, o.MaxPerNode = 1, 5 },
			want:    []outcome{{Pod: "ns/api-2", Result: "dry_run"}, {Pod: "ns2/web-2", Result: "skipped", Reason: SkipLimitPass}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			o := options()
			if tt.edit != nil {
				tt.edit(&o)
			}
			r := newTestRebalancer(t, tt.cluster, o)
			if diff := cmp.Diff(tt.want, outcomes(r.Pass(tCtx))); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRebalancerBackoff: a workload that cannot be helped is left alone, Cooldown x 2^(n-1) after
// its n-th failure in a row, at most MaxBackoff; a cap reached does not back off; and after an
// eviction that did not lower the skew, the next pass evicts nothing and backs off.
func TestRebalancerBackoff(t *testing.T) {
	tCtx := ktesting.Init(t)
	tainted := zones(func(n *st.NodeWrapper) *st.NodeWrapper {
		return n.Taints([]v1.Taint{{Key: "dedicated", Effect: v1.TaintEffectNoSchedule}})
	})
	r := newTestRebalancer(t, rebalanceCluster{nodes: tainted, pods: skewed("ns", "web", nil)}, options())
	clock := time.Unix(1e6, 0)
	r.now = func() time.Time { return clock }
	var got []time.Duration
	for range 6 {
		ds := r.Pass(tCtx)
		if len(ds) != 1 || ds[0].Reason != SkipNoFit {
			t.Fatalf("decisions %+v, want one skipped for %s", ds, SkipNoFit)
		}
		got = append(got, ds[0].Backoff)
		// Within the backoff: nothing.
		clock = clock.Add(ds[0].Backoff - time.Second)
		if ds := r.Pass(tCtx); len(ds) != 0 {
			t.Fatalf("decisions within the backoff: %+v", ds)
		}
		clock = clock.Add(time.Second)
	}
	want := []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoffs (-want +got):\n%s", diff)
	}

	t.Run("eviction forbidden (RBAC or the eviction policy): backs off", func(t *testing.T) {
		tCtx := ktesting.Init(t)
		o := options()
		o.DryRun = false
		r := newTestRebalancer(t, rebalanceCluster{nodes: zones(nil), pods: skewed("ns", "web", nil)}, o)
		r.k.cs.(*fake.Clientset).PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() != "eviction" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-2", errors.New("outside the bound"))
		})
		clock := time.Unix(1e6, 0)
		r.now = func() time.Time { return clock }
		var got []outcome
		for range 2 {
			for _, d := range r.Pass(tCtx) {
				got = append(got, outcome{Pod: d.Pod, Result: d.Result, Backoff: d.Backoff})
				clock = clock.Add(d.Backoff)
			}
		}
		want := []outcome{{Pod: "ns/web-2", Result: "refused", Backoff: 5 * time.Minute}, {Pod: "ns/web-2", Result: "refused", Backoff: 10 * time.Minute}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
	})

	t.Run("skew not lowered by an eviction", func(t *testing.T) {
		tCtx := ktesting.Init(t)
		o := options()
		o.DryRun = false
		pods := skewed("ns", "web", nil)
		r := newTestRebalancer(t, rebalanceCluster{nodes: zones(nil), pods: pods}, o)
		clock := time.Unix(1e6, 0)
		r.now = func() time.Time { return clock }
		if diff := cmp.Diff([]outcome{{Pod: "ns/web-2", Result: "evicted"}}, outcomes(r.Pass(tCtx))); diff != "" {
			t.Fatalf("first pass (-want +got):\n%s", diff)
		}
		// The replacement landed where the evicted replica was (the informers show the swap).
		if err := r.k.pods.GetIndexer().Delete(pods[2]); err != nil {
			t.Fatal(err)
		}
		back := replica("ns", "web", 9, "na0").Obj()
		back.OwnerReferences = pods[0].OwnerReferences
		if err := r.k.pods.GetIndexer().Add(back); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(o.Cooldown)
		got := outcomes(r.Pass(tCtx))
		if diff := cmp.Diff([]outcome{{Pod: "ns/web-9", Result: "skipped", Reason: SkipSkewNotLowered, Backoff: 5 * time.Minute}}, got); diff != "" {
			t.Errorf("pass after the replacement went back (-want +got):\n%s", diff)
		}
	})
}

// TestRebalanceOptionsValidate: every bad option is refused with its flag's name.
func TestRebalanceOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*RebalanceOptions)
		want string
	}{
		{"interval", func(o *RebalanceOptions) { o.Interval = 0 }, "--rebalance-interval"},
		{"cooldown", func(o *RebalanceOptions) { o.Cooldown = -time.Second }, "--rebalance-cooldown"},
		{"max backoff below the cooldown", func(o *RebalanceOptions) { o.MaxBackoff = time.Minute }, "--rebalance-max-backoff"},
		{"per pass", func(o *RebalanceOptions) { o.MaxPerPass = 0 }, "--rebalance-max-per-pass"},
		{"per node", func(o *RebalanceOptions) { o.MaxPerNode = 0 }, "--rebalance-max-per-node"},
		{"per namespace", func(o *RebalanceOptions) { o.MaxPerNamespace = -1 }, "--rebalance-max-per-namespace"},
		{"max skew", func(o *RebalanceOptions) { o.MaxSkew = 0 }, "max skew"},
	}
	if err := options().Validate(); err != nil {
		t.Fatalf("the test's options: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options()
			tt.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
