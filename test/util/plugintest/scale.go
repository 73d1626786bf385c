package plugintest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	shipped "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	// Registers the plugins' args with kube-scheduler's config scheme, as the binary does.
	_ "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
)

// MemoryNodeCounts are the cluster sizes the plugins' memory benchmarks measure; each of them
// builds and measures in a few seconds, so `make unit` runs them all once.
var MemoryNodeCounts = []int{1000, 5000, 15000}

// PerfNodes returns n nodes labelled as scheduler_perf's suite labels them
// (test/perf/templates/node.yaml): every 20th node is in the AKS-style system pool with a
// PreferNoSchedule taint, the others in pool "user", over 2 fault domains (the zone label) x 3
// update domains, each its own host.
func PerfNodes(n int) []*v1.Node {
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		name := fmt.Sprintf("perf-node-%d", i)
		pool := "user"
		if i%20 == 0 {
			pool = "system"
		}
		node := st.MakeNode().Name(name).
			Label(v1.LabelHostname, name).
			Label("kubernetes.azure.com/agentpool", pool).
			Label("kubernetes.azure.com/mode", pool).
			Label(v1.LabelTopologyZone, fmt.Sprintf("fd-%d", i%2)).
			Label("topology.pool-scheduler.io/update-domain", fmt.Sprintf("ud-%d", i/2%3)).
			Capacity(map[v1.ResourceName]string{v1.ResourcePods: "110", v1.ResourceCPU: "4", v1.ResourceMemory: "32Gi"}).
			Condition(v1.NodeReady, v1.ConditionTrue, "", "")
		if pool == "system" {
			node.Taints([]v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}})
		}
		nodes[i] = node.Obj()
	}
	return nodes
}

// ShippedArgs returns plugin's args in the shipped configuration (manifests/scheduler/config.yaml),
// decoded and defaulted by kube-scheduler's decoder, as the binary loads them.
func ShippedArgs(tb testing.TB, plugin string) k8sruntime.Object {
	tb.Helper()
	obj, gvk, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode(shipped.Config, nil, nil)
	if err != nil {
		tb.Fatalf("decoding the shipped configuration: %v", err)
	}
	cfg, ok := obj.(*kubeschedulerconfig.KubeSchedulerConfiguration)
	if !ok {
		tb.Fatalf("the shipped configuration decoded as %s", gvk)
	}
	for _, prof := range cfg.Profiles {
		for _, pc := range prof.PluginConfig {
			if pc.Name == plugin {
				return pc.Args
			}
		}
	}
	tb.Fatalf("the shipped configuration has no args for %s", plugin)
	return nil
}

// LiveHeap returns the bytes held by reachable heap objects: HeapAlloc right after a full
// collection (plus whatever other goroutines allocated since, which a measurement keeps small).
func LiveHeap() uint64 {
	// The second collection frees what finalizers released in the first.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// HeapGrowth returns how much the live heap grows across build, which returns what must stay
// alive (the plugin under measurement). Everything build's result does not reach is garbage by
// then and not counted.
//
// With $ARTIFACTS set it also records every allocation (runtime.MemProfileRate = 1) and writes
// heap profiles before and after build, $ARTIFACTS/<name>-base.pprof and <name>.pprof, so that
// `go tool pprof -sample_index=inuse_space -diff_base <name>-base.pprof -top <name>.pprof`
// lists what build's result holds by allocation site.
func HeapGrowth(tb testing.TB, name string, build func() any) int64 {
	tb.Helper()
	dir := os.Getenv("ARTIFACTS")
	if dir != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1
	}
	before := LiveHeap()
	writeHeapProfile(tb, dir, name+"-base")
	kept := build()
	after := LiveHeap()
	writeHeapProfile(tb, dir, name)
	runtime.KeepAlive(kept)
	return int64(after) - int64(before)
}

func writeHeapProfile(tb testing.TB, dir, name string) {
	tb.Helper()
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	// WriteHeapProfile reports the heap as of the last collection, which LiveHeap just ran.
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
}

// PoolNodes returns n nodes labelled as scheduler_perf's pool-cluster workload labels them
// (test/perf/templates/node-pools.yaml): every 20th node in the AKS-style system pool, every
// other node in one of 4 large pools, the rest in one of 25 small pools; 2 zones x 3 update
// domains per pool.
func PoolNodes(n int) []*v1.Node {
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		name := fmt.Sprintf("perf-node-%d", i)
		pool, mode := fmt.Sprintf("small-%d", i/2%25), "user"
		switch {
		case i%20 == 0:
			pool, mode = "system", "system"
		case i%2 == 0:
			pool = fmt.Sprintf("large-%d", i/2%4)
		}
		node := st.MakeNode().Name(name).
			Label(v1.LabelHostname, name).
			Label("kubernetes.azure.com/agentpool", pool).
			Label("kubernetes.azure.com/mode", mode).
			Label(v1.LabelTopologyZone, fmt.Sprintf("fd-%d", i/50%2)).
			Label("topology.pool-scheduler.io/update-domain", fmt.Sprintf("ud-%d", i/100%3)).
			Capacity(map[v1.ResourceName]string{v1.ResourcePods: "110", v1.ResourceCPU: "4", v1.ResourceMemory: "32Gi"}).
			Condition(v1.NodeReady, v1.ConditionTrue, "", "")
		if mode == "system" {
			node.Taints([]v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}})
		}
		nodes[i] = node.Obj()
	}
	return nodes
}
