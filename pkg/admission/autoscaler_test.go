package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// TestAutoscalerSimulationRefusesSystemNodes runs pods through what cluster-autoscaler and
// Karpenter simulate: the upstream framework with the default profile's in-tree plugins only
// (cluster-autoscaler's SchedulerPluginRunner runs RunPreFilterPlugins and RunFilterPlugins).
// A user pod with a wildcard toleration fits a soft-tainted system node there, so an
// autoscaler would not scale the user pool for it while SystemPoolGuard keeps it pending. After
// the admission path's mutation the in-tree NodeAffinity refuses every system node.
func TestAutoscalerSimulationRefusesSystemNodes(t *testing.T) {
	tCtx := ktesting.Init(t)
	schedmetrics.Register() // the framework records into the scheduler's metrics
	cfg, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	soft := []v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}}
	node := func(name string, labels map[string]string) *v1.Node {
		n := st.MakeNode().Name(name).Label(v1.LabelHostname, name).
			Capacity(map[v1.ResourceName]string{v1.ResourcePods: "110", v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi"})
		for k, val := range labels {
			n.Label(k, val)
		}
		return n.Obj()
	}
	nodes := []*v1.Node{
		// A stock AKS system pool: a system-mode label and at most a soft taint.
		node("aks-system-0", map[string]string{"kubernetes.azure.com/agentpool": "sysnp", "kubernetes.azure.com/mode": "system"}),
		// A pool named system (Banzai Cloud, or any cluster that names it so).
		node("system-0", map[string]string{"agentpool": "system"}),
		node("user-0", map[string]string{"kubernetes.azure.com/agentpool": "user", "kubernetes.azure.com/mode": "user"}),
		node("unlabelled-0", nil),
	}
	nodes[0].Spec.Taints = soft
	systemNodes := map[string]bool{"aks-system-0": true, "system-0": true}

	args := profile.DefaultArgs()
	m, err := NewMutator("pool-scheduler", args.SystemPoolGuard, true)
	if err != nil {
		t.Fatal(err)
	}
	registry := frameworkplugins.NewInTreeRegistry()
	client := fake.NewClientset()
	fw, err := frameworkruntime.NewFramework(tCtx, registry, &cfg.Profiles[0],
		frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nodes)),
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)))
	if err != nil {
		t.Fatal(err)
	}
	feasible := func(pod *v1.Pod) map[string]bool {
		state := framework.NewCycleState()
		if _, s, _ := fw.RunPreFilterPlugins(tCtx, state, pod); !s.IsSuccess() {
			t.Fatalf("PreFilter: %v", s)
		}
		out := map[string]bool{}
		for _, n := range nodes {
			ni := framework.NewNodeInfo()
			ni.SetNode(n)
			out[n.Name] = fw.RunFilterPlugins(tCtx, state.Clone(), pod, ni).IsSuccess()
		}
		return out
	}

	for _, tt := range []struct {
		name string
		pod  *v1.Pod
	}{
		{name: "plain user pod", pod: st.MakePod().Namespace("apps").Name("web").Container("pause").Obj()},
		{name: "wildcard toleration", pod: st.MakePod().Namespace("apps").Name("agent").Container("pause").
			Toleration("").Obj()},
		{name: "own node affinity", pod: st.MakePod().Namespace("apps").Name("ssd").Container("pause").
			NodeAffinityNotIn("kubernetes.io/hostname", []string{"user-0"}).Obj()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := feasible(tt.pod)
			if !before["aks-system-0"] || !before["system-0"] {
				t.Fatalf("without the mutation the in-tree plugins should accept the system nodes (the autoscalers' blind spot): %v", before)
			}
			pod := tt.pod.DeepCopy()
			if res := m.Mutate(pod); !res.NodeAffinity {
				t.Fatalf("Mutate did not add the node affinity: %+v", res)
			}
			after := feasible(pod)
			for name, ok := range after {
				want := before[name] && !systemNodes[name]
				if ok != want {
					t.Errorf("node %s: feasible %v after the mutation, want %v", name, ok, want)
				}
			}
			// A system pod keeps the system pool.
			sys := tt.pod.DeepCopy()
			sys.Namespace = "kube-system"
			if res := m.Mutate(sys); res.NodeAffinity {
				t.Errorf("system pod got the node affinity")
			}
			if diff := cmp.Diff(before, feasible(sys)); diff != "" {
				t.Errorf("system pod's feasible nodes changed (-before +after):\n%s", diff)
			}
		})
	}
}
