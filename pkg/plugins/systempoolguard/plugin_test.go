package systempoolguard

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	klogtesting "k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

func defaultArgs() *config.SystemPoolGuardArgs {
	return configscheme.DefaultSystemPoolGuardArgs()
}

func newTestPlugin(t testing.TB, modify func(*config.SystemPoolGuardArgs)) *SystemPoolGuard {
	t.Helper()
	args := defaultArgs()
	if modify != nil {
		modify(args)
	}
	pl, err := New(context.Background(), args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*SystemPoolGuard)
}

var (
	banzaiSystem = st.MakeNode().Name("sys").Label("nodepool.banzaicloud.io/name", "system").Obj()
	aksSystem    = st.MakeNode().Name("aks-sys").Label("kubernetes.azure.com/agentpool", "sysnp").Label("kubernetes.azure.com/mode", "system").
			Taints([]v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}}).Obj()
	userNode   = st.MakeNode().Name("user").Label("nodepool.banzaicloud.io/name", "spot").Obj()
	noPoolNode = st.MakeNode().Name("nopool").Obj()
)

func wildcardPod() *v1.Pod {
	p := st.MakePod().Namespace("default").Name("wild").Obj()
	p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	return p
}

// admittedPod is a user pod with the required node affinity admission gives the pods it hands to
// pool-scheduler: one term per alternative of pool.AvoidSystemNodes.
func admittedPod(t testing.TB, args *config.SystemPoolGuardArgs) *v1.Pod {
	t.Helper()
	alts, err := pool.AvoidSystemNodes(args)
	if err != nil || len(alts) == 0 {
		t.Fatalf("AvoidSystemNodes: %v, %d alternatives", err, len(alts))
	}
	p := st.MakePod().Namespace("default").Name("admitted").Obj()
	var terms []v1.NodeSelectorTerm
	for _, alt := range alts {
		terms = append(terms, v1.NodeSelectorTerm{MatchExpressions: alt})
	}
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	return p
}

func TestFilter(t *testing.T) {
	aksSelector := func(a *config.SystemPoolGuardArgs) {
		a.SystemNodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}
	}
	// The default systemNodeSelector is AKS's system mode; nil switches it off.
	noSelector := func(a *config.SystemPoolGuardArgs) { a.SystemNodeSelector = nil }
	rejected := fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonSystemPool).WithPlugin(Name)
	skip := fwk.NewStatus(fwk.Skip)
	tests := []struct {
		name          string
		args          func(*config.SystemPoolGuardArgs)
		pod           *v1.Pod
		node          *v1.Node
		wantPreFilter *fwk.Status
		wantFilter    *fwk.Status
	}{
		{name: "user pod on Banzai system pool", pod: st.MakePod().Namespace("default").Obj(), node: banzaiSystem, wantFilter: rejected},
		{name: "user pod on user pool", pod: st.MakePod().Namespace("default").Obj(), node: userNode},
		{name: "user pod on a node without pool", pod: st.MakePod().Namespace("default").Obj(), node: noPoolNode},
		{name: "wildcard toleration on system pool", pod: wildcardPod(), node: banzaiSystem, wantFilter: rejected},
		{name: "wildcard toleration on AKS PreferNoSchedule system pool", args: aksSelector, pod: wildcardPod(), node: aksSystem, wantFilter: rejected},
		{name: "AKS mode label ignored without selector", args: noSelector, pod: st.MakePod().Namespace("default").Obj(), node: aksSystem},
		{name: "AKS system mode is a system node by default", pod: st.MakePod().Namespace("default").Obj(), node: aksSystem, wantFilter: rejected},
		{name: "kube-system pod skips the filter", pod: st.MakePod().Namespace("kube-system").Obj(), node: banzaiSystem, wantPreFilter: skip},
		{
			name: "DaemonSet pod skips the filter",
			pod:  st.MakePod().Namespace("monitoring").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj(),
			node: banzaiSystem, wantPreFilter: skip,
		},
		{
			name: "DaemonSet pod filtered when DaemonSets are not system pods",
			args: func(a *config.SystemPoolGuardArgs) { a.DaemonSetPodsAreSystemPods = false },
			pod:  st.MakePod().Namespace("monitoring").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj(),
			node: banzaiSystem, wantFilter: rejected,
		},
		{
			// The owner reference is the pod's word: only the apps group's DaemonSet counts.
			name: "pod owned by a DaemonSet of another API group filtered",
			pod:  st.MakePod().Namespace("monitoring").OwnerReference("agent", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "DaemonSet"}).Obj(),
			node: banzaiSystem, wantFilter: rejected,
		},
		{
			// Admission's node affinity (pool.AvoidSystemNodes, ANDed into every term) already
			// refuses system nodes through NodeAffinity: the guard's Filter would repeat it.
			name: "user pod with admission's affinity skips the filter", pod: admittedPod(t, defaultArgs()), node: aksSystem, wantPreFilter: skip,
		},
		{
			name: "user pod with part of admission's affinity filtered",
			pod: func() *v1.Pod {
				p := admittedPod(t, defaultArgs())
				terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				terms[0].MatchExpressions = terms[0].MatchExpressions[1:]
				return p
			}(),
			node: aksSystem, wantFilter: rejected,
		},
		{
			name: "custom system pool names",
			args: func(a *config.SystemPoolGuardArgs) { a.SystemPools = []string{"infra"} },
			pod:  st.MakePod().Namespace("default").Obj(),
			node: st.MakeNode().Name("infra").Label("agentpool", "infra").Obj(), wantFilter: rejected,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, tt.args)
			state := framework.NewCycleState()
			_, status := pl.PreFilter(ctx, state, tt.pod, nil)
			if diff := cmp.Diff(tt.wantPreFilter, status); diff != "" {
				t.Fatalf("PreFilter (-want +got):\n%s", diff)
			}
			if status.IsSkip() {
				return
			}
			if diff := cmp.Diff(tt.wantFilter, pl.Filter(ctx, state, tt.pod, plugintest.NodeInfo(tt.node))); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantPreScore *fwk.Status
		wantScores   map[string]int64
	}{
		{
			name:       "system pod prefers system nodes",
			pod:        withPriorityClass(st.MakePod().Namespace("ingress").Obj(), "system-cluster-critical"),
			wantScores: map[string]int64{"sys": framework.MaxNodeScore, "user": 0, "nopool": 0},
		},
		{name: "user pods are not scored", pod: st.MakePod().Namespace("default").Obj(), wantPreScore: fwk.NewStatus(fwk.Skip)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, nil)
			state := framework.NewCycleState()
			status := pl.PreScore(ctx, state, tt.pod, nil)
			if diff := cmp.Diff(tt.wantPreScore, status); diff != "" {
				t.Fatalf("PreScore (-want +got):\n%s", diff)
			}
			if status.IsSkip() {
				return
			}
			got := map[string]int64{}
			for _, n := range []*v1.Node{banzaiSystem, userNode, noPoolNode} {
				s, st := pl.Score(ctx, state, tt.pod, plugintest.NodeInfo(n))
				if !st.IsSuccess() {
					t.Fatal(st)
				}
				got[n.Name] = s
			}
			if diff := cmp.Diff(tt.wantScores, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewRefusesInvalidArgs(t *testing.T) {
	args := defaultArgs()
	args.SystemNodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sometimes"}}}
	if _, err := New(context.Background(), args, nil); err == nil {
		t.Fatal("New accepted an invalid selector")
	}
	if _, err := New(context.Background(), &config.NodePoolReadyArgs{}, nil); err == nil {
		t.Fatal("New accepted args of another plugin")
	}
}

func TestFilterCountsRejections(t *testing.T) {
	registerMetrics()
	_, ctx := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, nil)
	before, _ := testutil.GetCounterMetricValue(rejections[pool.SystemPoolName])
	pl.Filter(ctx, framework.NewCycleState(), st.MakePod().Obj(), plugintest.NodeInfo(banzaiSystem))
	after, _ := testutil.GetCounterMetricValue(rejections[pool.SystemPoolName])
	if after-before != 1 {
		t.Errorf("system_pool rejections grew by %v, want 1", after-before)
	}
}

func TestHints(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pl := newTestPlugin(t, nil)
	pod := st.MakePod().Namespace("default").Name("p").UID("p").Obj()
	relabelled := banzaiSystem.DeepCopy()
	relabelled.Labels["nodepool.banzaicloud.io/name"] = "general"
	tolerating := pod.DeepCopy()
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: "CriticalAddonsOnly", Operator: v1.TolerationOpExists}}
	wildcard := pod.DeepCopy()
	wildcard.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}

	nodeTests := []struct {
		name     string
		old, new *v1.Node
		want     fwk.QueueingHint
	}{
		{name: "user node added", new: userNode, want: fwk.Queue},
		{name: "system node added", new: banzaiSystem, want: fwk.QueueSkip},
		{name: "system node relabelled into a user pool", old: banzaiSystem, new: relabelled, want: fwk.Queue},
		{name: "user node label change", old: userNode, new: userNode.DeepCopy(), want: fwk.QueueSkip},
	}
	for _, tt := range nodeTests {
		var oldObj any
		if tt.old != nil {
			oldObj = tt.old
		}
		if got, err := pl.isSchedulableAfterNodeChange(logger, pod, oldObj, tt.new); err != nil || got != tt.want {
			t.Errorf("node hint %q = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	podTests := []struct {
		name string
		new  *v1.Pod
		want fwk.QueueingHint
	}{
		{name: "pod gains the system toleration", new: tolerating, want: fwk.Queue},
		{name: "pod gains a wildcard toleration", new: wildcard, want: fwk.QueueSkip},
		{name: "another pod", new: st.MakePod().Namespace("kube-system").Name("other").UID("other").Obj(), want: fwk.QueueSkip},
	}
	for _, tt := range podTests {
		if got, err := pl.isSchedulableAfterPodChange(logger, pod, pod, tt.new); err != nil || got != tt.want {
			t.Errorf("pod hint %q = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func withPriorityClass(p *v1.Pod, name string) *v1.Pod {
	p.Spec.PriorityClassName = name
	return p
}

// BenchmarkFilter runs Filter (and Score for a system pod) over every node per op, a tenth of
// them system nodes (half by pool name, half by selector); allocs/op is that of the refused
// nodes' Statuses (Score: 0). One sub-benchmark per cluster size: whether a node costs more in a
// larger cluster.
func BenchmarkFilter(b *testing.B) {
	for _, n := range []int{5000, 15000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkFilter(b, n) })
	}
}

func benchmarkFilter(b *testing.B, nodes int) {
	pl := newTestPlugin(b, func(a *config.SystemPoolGuardArgs) {
		a.SystemNodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}
	})
	infos := make([]fwk.NodeInfo, nodes)
	objs := make([]*v1.Node, nodes)
	for i := range infos {
		n := st.MakeNode().Name(fmt.Sprint("node-", i)).Label("kubernetes.azure.com/agentpool", fmt.Sprint("pool-", i%7)).
			Label("kubernetes.azure.com/mode", "user").Label("kubernetes.io/hostname", fmt.Sprint("node-", i))
		switch i % 20 {
		case 0:
			n.Label("kubernetes.azure.com/agentpool", "system")
		case 1:
			n.Label("kubernetes.azure.com/mode", "system")
		}
		objs[i] = n.Obj()
		infos[i] = plugintest.NodeInfo(objs[i])
	}
	pl.snapshot = cache.NewSnapshot(nil, objs).NodeInfos()
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(b, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	userPod := st.MakePod().Namespace("default").Obj()
	systemPod := st.MakePod().Namespace("kube-system").Obj()
	state := framework.NewCycleState()
	b.Run("Filter", func(b *testing.B) {
		// Steady state: each node version is classified once, then served from the memo, which
		// the next cycle's PreFilter compacts.
		pl.PreFilter(ctx, state, userPod, nil)
		for _, ni := range infos {
			pl.Filter(ctx, state, userPod, ni)
		}
		pl.PreFilter(ctx, state, userPod, nil)
		b.ReportAllocs()
		for b.Loop() {
			for _, ni := range infos {
				pl.Filter(ctx, state, userPod, ni)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/node")
	})
	// A pod admission handed to pool-scheduler carries a node affinity that refuses the system
	// nodes (pool.AvoidSystemNodes): the in-tree NodeAffinity Filter evaluates it on every node
	// (this is its per-node check, nodeaffinity.RequiredNodeAffinity.Match), and the guard's
	// PreFilter, seeing it, skips the guard's Filter (one check per cycle, below).
	admissionArgs := defaultArgs()
	admissionArgs.SystemNodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}
	admitted := admittedPod(b, admissionArgs)
	b.Run("AdmissionAffinity", func(b *testing.B) {
		required := nodeaffinity.GetRequiredNodeAffinity(admitted)
		b.ReportAllocs()
		for b.Loop() {
			for _, ni := range infos {
				if _, err := required.Match(ni.Node()); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/node")
	})
	b.Run("PreFilterAdmitted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, s := pl.PreFilter(ctx, state, admitted, nil); !s.IsSkip() {
				b.Fatalf("PreFilter of an admitted pod: %v, want Skip", s)
			}
		}
	})
	b.Run("Score", func(b *testing.B) {
		pl.PreScore(ctx, state, systemPod, nil)
		b.ReportAllocs()
		for b.Loop() {
			for _, ni := range infos {
				pl.Score(ctx, state, systemPod, ni)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/node")
	})
}

func TestFilterAndScoreDoNotAllocate(t *testing.T) {
	ctx := klog.NewContext(context.Background(), klogtesting.NewLogger(t, klogtesting.NewConfig(klogtesting.Verbosity(2))))
	pl := newTestPlugin(t, func(a *config.SystemPoolGuardArgs) {
		a.SystemNodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}
	})
	state := framework.NewCycleState()
	nodes := []fwk.NodeInfo{plugintest.NodeInfo(banzaiSystem), plugintest.NodeInfo(aksSystem), plugintest.NodeInfo(userNode), plugintest.NodeInfo(noPoolNode)}
	pod := st.MakePod().Namespace("default").Obj()
	// Score and accepting Filter allocate nothing; refusing a node allocates its Status (the
	// framework writes into it, so it cannot be shared), as upstream plugins do.
	for _, ni := range nodes {
		rejected := !pl.Filter(ctx, state, pod, ni).IsSuccess()
		n := testing.AllocsPerRun(50, func() { pl.Filter(ctx, state, pod, ni) })
		if max := map[bool]float64{false: 0, true: 2}[rejected]; n > max {
			t.Errorf("Filter(%s, rejected=%v) allocates %v times, want at most %v", ni.Node().Name, rejected, n, max)
		}
		if n := testing.AllocsPerRun(50, func() { pl.Score(ctx, state, pod, ni) }); n != 0 {
			t.Errorf("Score(%s) allocates %v times", ni.Node().Name, n)
		}
	}
}
