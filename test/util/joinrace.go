package util

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// AgentPoolKey is AKS's stock pool label, on a node from its registration.
const AgentPoolKey = "kubernetes.azure.com/agentpool"

const joinRaceTimeout = 30 * time.Second

// KustomizeBuild builds a kustomization of the repository (dir relative to its root) as
// `kubectl apply -k` does, generators and patches applied.
func KustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resmap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(RepoRoot(), dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resmap.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// BanzaiLabels is a NodePoolLabelSet of the field report: the operator's CR, including the pool
// name on Banzai's pool key (allowed: the set's own name).
func BanzaiLabels(poolName string) map[string]string {
	return map[string]string{
		"node.banzaicloud.io/NetworkPerfCategory": "low",
		"node.banzaicloud.io/cpu":                 "1",
		"node.banzaicloud.io/ondemand":            "false",
		"nodepool.banzaicloud.io/name":            poolName,
	}
}

// OperatorLabels plays the nodepool-labels-operator: one merge patch setting the labels and the
// managed-labels annotation as it writes them (every key, in map order, not sorted).
func OperatorLabels(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, node string, labels map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keys))) // not the sorted order pool-labeler writes
	var quoted []string
	for _, k := range keys {
		quoted = append(quoted, strconv.Quote(k))
	}
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, fmt.Sprintf("%q:%q", k, labels[k]))
	}
	annotation := "[" + strings.Join(quoted, ",") + "]"
	patch := fmt.Sprintf(`{"metadata":{"labels":{%s},"annotations":{%q:%q}}}`, strings.Join(pairs, ","), pool.ManagedLabelsAnnotation, annotation)
	PatchNode(ctx, t, cp.Client, node, patch)
}

// RaceResult is what a join race measured.
type RaceResult struct {
	// Early are pods bound to a node before it carried its pool's labels.
	Early []string
	// Latency is, per pod, the time from its node's labels landing to its binding, as the
	// watches saw them.
	Latency []time.Duration
}

func (r RaceResult) String() string {
	if len(r.Latency) == 0 {
		return "no pods"
	}
	l := slices.Clone(r.Latency)
	slices.Sort(l)
	return fmt.Sprintf("%d pods, label-to-bind p50 %v, max %v", len(l), l[len(l)/2].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
}

// JoinRace creates pods pinned to poolName (the stock AKS pool label, which a node has from
// registration) before any node of the pool exists, then n nodes of the pool join without its
// NodePoolLabelSet's labels (want); label, if not nil, applies them after a second (else a
// labeler does). It waits for every pod to bind and compares, by resourceVersion (etcd's
// revision, one order for every object), each pod's binding with the first version of its node
// that carried every label of want.
func JoinRace(tCtx context.Context, t *testing.T, cp *controlplane.ControlPlane, podNS, poolName string, n int, want map[string]string, label func(node string)) RaceResult {
	t.Helper()
	return JoinRaceWith(tCtx, t, cp, podNS, poolName, n, want, label, JoinRaceOptions{})
}

// JoinRaceOptions vary a join race.
type JoinRaceOptions struct {
	// SchedulerName of the pods (default: pool-scheduler's).
	SchedulerName string
	// Taints the nodes register with (a startup taint, say).
	Taints []v1.Taint
}

// JoinRaceWith is JoinRace with options.
func JoinRaceWith(tCtx context.Context, t *testing.T, cp *controlplane.ControlPlane, podNS, poolName string, n int, want map[string]string, label func(node string), opts JoinRaceOptions) RaceResult {
	t.Helper()
	cs := cp.Client
	type seen struct {
		rv uint64
		at time.Time
	}
	var mu sync.Mutex
	labelled := map[string]seen{} // node -> first version with want
	bound := map[string]seen{}    // pod -> binding
	boundTo := map[string]string{}
	rvOf := func(o metav1.Object) uint64 {
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Errorf("resourceVersion %q: %v", o.GetResourceVersion(), err)
		}
		return rv
	}
	nodeWatch, err := cs.CoreV1().Nodes().Watch(tCtx, metav1.ListOptions{LabelSelector: AgentPoolKey + "=" + poolName})
	if err != nil {
		t.Fatal(err)
	}
	podWatch, err := cs.CoreV1().Pods(podNS).Watch(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nodeWatch.Stop)
	t.Cleanup(podWatch.Stop)
	go func() {
		for ev := range nodeWatch.ResultChan() {
			node, ok := ev.Object.(*v1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			carries := true
			for k, v := range want {
				carries = carries && node.Labels[k] == v
			}
			mu.Lock()
			if _, done := labelled[node.Name]; carries && !done {
				labelled[node.Name] = seen{rvOf(node), time.Now()}
			}
			mu.Unlock()
		}
	}()
	go func() {
		for ev := range podWatch.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok || pod.Spec.NodeName == "" || !strings.HasPrefix(pod.Name, poolName+"-pod-") {
				continue
			}
			mu.Lock()
			if _, done := bound[pod.Name]; !done {
				bound[pod.Name], boundTo[pod.Name] = seen{rvOf(pod), time.Now()}, pod.Spec.NodeName
			}
			mu.Unlock()
		}
	}()

	var pods []string
	for i := range 2 * n {
		name := fmt.Sprintf("%s-pod-%d", poolName, i)
		p := Pod(podNS, name).NodeSelector(map[string]string{AgentPoolKey: poolName})
		if opts.SchedulerName != "" {
			p.SchedulerName(opts.SchedulerName)
		}
		CreatePod(tCtx, t, cs, p.Obj())
		pods = append(pods, name)
	}
	// The pods have found no node, and their first backoff (1 s) has passed: from here on, how
	// soon they bind is up to the scheduler's reaction to the nodes and their labels, not to a
	// backoff they started before any node existed.
	for _, p := range pods {
		WaitForPodUnschedulable(tCtx, t, cs, podNS, p, "", joinRaceTimeout)
	}
	time.Sleep(1100 * time.Millisecond)
	var nodes []string
	for i := range n {
		name := fmt.Sprintf("aks-%s-12345678-vmss%06d", poolName, i)
		CreateNode(tCtx, t, cs, Node(name, map[string]string{AgentPoolKey: poolName, "kubernetes.azure.com/mode": "user"}).Taints(opts.Taints).Obj())
		nodes = append(nodes, name)
	}
	if label != nil {
		// Long enough for any scheduler that does not wait to bind the pods first.
		time.Sleep(time.Second)
		for _, node := range nodes {
			label(node)
		}
	}
	for _, p := range pods {
		WaitForPodBound(tCtx, t, cs, podNS, p, joinRaceTimeout)
	}
	var r RaceResult
	err = wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, joinRaceTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(bound) == len(pods), nil
	})
	if err != nil {
		t.Fatalf("the pod watch saw %d of %d bindings", len(bound), len(pods))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range pods {
		b, l := bound[p], labelled[boundTo[p]]
		if l.rv == 0 || b.rv < l.rv {
			r.Early = append(r.Early, fmt.Sprintf("%s on %s (bound at revision %d, labels at %d)", p, boundTo[p], b.rv, l.rv))
			continue
		}
		r.Latency = append(r.Latency, b.at.Sub(l.at))
	}
	return r
}
