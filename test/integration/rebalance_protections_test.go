package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestRebalancerHonoursDoNotDisrupt: a ReplicaSet's 6 replicas all in zone-0, 3 of them
// annotated karpenter.sh/do-not-disrupt=true and 2 cluster-autoscaler.kubernetes.io/
// safe-to-evict=false, 1 left bare. The rebalancer evicts the bare one (its replacement goes to
// another zone); the next pass finds only annotated replicas in zone-0, evicts nothing and
// reports do_not_disrupt; the 5 annotated replicas are the same pods at the end.
func TestRebalancerHonoursDoNotDisrupt(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp, topo := spreadCluster(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "protected")
	pods, uncordon := replicasInZone0(tCtx, t, cs, topo, ns, "web", 6)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	annotations := []map[string]string{
		{spreadkeeper.KarpenterDoNotDisruptAnnotation: "true"},
		{spreadkeeper.KarpenterDoNotDisruptAnnotation: "true"},
		{spreadkeeper.KarpenterDoNotDisruptAnnotation: "true"},
		{spreadkeeper.SafeToEvictAnnotation: "false"},
		{spreadkeeper.SafeToEvictAnnotation: "false"},
	}
	protected := map[types.UID]string{}
	for i, a := range annotations {
		p := pods[i]
		for k, v := range a {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v)
			if _, err := cs.CoreV1().Pods(ns).Patch(tCtx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			protected[p.UID] = p.Name
		}
	}
	bare := pods[len(pods)-1]
	uncordon()
	// Started after the annotations and the uncordoning: its informers' first list holds both,
	// so no pass can see the zones open and a replica not yet annotated.
	keeper := util.StartDeletionCostKeeper(t, cp)
	r := startRebalancer(tCtx, t, keeper, false)

	// A pass that decides: the workload waits while a replacement is pending or starting.
	pass := func() []spreadkeeper.Decision {
		t.Helper()
		var got []spreadkeeper.Decision
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got = r.Pass(ctx)
			return len(got) > 0, nil
		})
		if err != nil {
			t.Fatal("no rebalancing decision within a minute")
		}
		return got
	}
	type outcome struct{ Pod, Result, Reason string }
	outcomes := func(ds []spreadkeeper.Decision) []outcome {
		var out []outcome
		for _, d := range ds {
			out = append(out, outcome{Pod: d.Pod, Result: d.Result, Reason: d.Reason})
		}
		return out
	}
	if diff := cmp.Diff([]outcome{{Pod: ns + "/" + bare.Name, Result: "evicted"}}, outcomes(pass())); diff != "" {
		t.Fatalf("first pass: decisions (-want +got):\n%s", diff)
	}
	got := pass()
	if len(got) != 1 || got[0].Result != "skipped" || got[0].Reason != spreadkeeper.SkipDoNotDisrupt {
		t.Fatalf("second pass: decisions %+v, want one skipped for %s", got, spreadkeeper.SkipDoNotDisrupt)
	}
	if _, ok := protected[podUID(ns, got[0].Pod, pods)]; !ok {
		t.Errorf("second pass skipped %s, want an annotated replica named", got[0].Pod)
	}
	after := util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, time.Minute)
	left := map[types.UID]string{}
	for _, p := range after {
		if _, ok := protected[p.UID]; ok {
			left[p.UID] = p.Name
		}
		if p.UID == bare.UID {
			t.Errorf("the bare replica %s is still there", p.Name)
		}
	}
	if diff := cmp.Diff(protected, left); diff != "" {
		t.Errorf("annotated replicas (-before +after):\n%s", diff)
	}
	t.Logf("after: %s", topo.SpreadOf(after))
}

// podUID is the UID of namespace/name among pods ("" if none).
func podUID(ns, key string, pods []v1.Pod) types.UID {
	for _, p := range pods {
		if ns+"/"+p.Name == key {
			return p.UID
		}
	}
	return ""
}
