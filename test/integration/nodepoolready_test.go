package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

const (
	poolKey         = "nodepool.banzaicloud.io/name"
	updateDomainKey = "topology.pool-scheduler.io/update-domain"
	bindTimeout     = 30 * time.Second
)

// TestNodePoolReady runs the shipped profile (plus a required label key) against a real
// apiserver and walks through every way a node can be not ready, and back.
func TestNodePoolReady(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client

	cfg := util.LoadShippedConfig(t)
	profile := cfg.Profiles[0]
	args := util.PluginArgs(t, &profile, nodepoolready.Name).(*config.NodePoolReadyArgs)
	args.RequiredLabelKeys = []string{updateDomainKey}
	util.StartScheduler(t, cp, profile)

	labelSetNS := util.CreateNamespace(tCtx, t, cs, "labelsets")
	ns := util.CreateNamespace(tCtx, t, cs, "pods")

	// pin creates a pod that can only go to node, so the node's verdict is the pod's fate.
	pin := func(name, node string) *v1.Pod {
		return util.CreatePod(tCtx, t, cs, util.Pod(ns, name).NodeSelector(map[string]string{v1.LabelHostname: node}).Obj())
	}
	ready := map[string]string{updateDomainKey: "0"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	t.Run("unknown pool is allowed while no NodePoolLabelSet exists", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("fresh-install", ready).Obj())
		pin("fresh-install-pod", "fresh-install")
		util.WaitForPodBound(tCtx, t, cs, ns, "fresh-install-pod", bindTimeout)
	})

	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "spot", map[string]string{
		"example.com/lifecycle": "spot", "example.com/team": "data",
	}))

	t.Run("pod waits for late pool labels and binds when they land", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("spot-late", with(ready, poolKey, "spot")).Obj())
		pin("late-pod", "spot-late")
		msg := util.WaitForPodUnschedulable(tCtx, t, cs, ns, "late-pod", pool.LabelsNotApplied.String(), bindTimeout)
		t.Logf("while unlabelled: %s", msg)
		// The census, which lets cycles skip Filter while it is 0: fresh-install (no pool label,
		// judged again when the first NodePoolLabelSet arrived) and spot-late.
		waitForUnreadyNodes(tCtx, t, 2)

		// Labels arrive one at a time, as from a slow labeler: still not ready after the first.
		util.PatchNode(tCtx, t, cs, "spot-late", `{"metadata":{"labels":{"example.com/lifecycle":"spot"}}}`)
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "late-pod", pool.LabelsNotApplied.String(), bindTimeout)

		start := time.Now()
		util.PatchNode(tCtx, t, cs, "spot-late", `{"metadata":{"labels":{"example.com/team":"data"}}}`)
		node := util.WaitForPodBound(tCtx, t, cs, ns, "late-pod", bindTimeout)
		t.Logf("label-to-bind latency: %v (bound to %s)", time.Since(start), node)
		waitForUnreadyNodes(tCtx, t, 1)
	})

	t.Run("wrong label value is not ready", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("spot-wrong", with(ready, poolKey, "spot", "example.com/lifecycle", "ondemand", "example.com/team", "data")).Obj())
		pin("wrong-pod", "spot-wrong")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "wrong-pod", pool.LabelsNotApplied.String(), bindTimeout)
		util.PatchNode(tCtx, t, cs, "spot-wrong", `{"metadata":{"labels":{"example.com/lifecycle":"spot"}}}`)
		util.WaitForPodBound(tCtx, t, cs, ns, "wrong-pod", bindTimeout)
	})

	t.Run("stale managed label", func(t *testing.T) {
		node := util.Node("spot-stale", with(ready, poolKey, "spot", "example.com/lifecycle", "spot", "example.com/team", "data", "example.com/old", "x")).Obj()
		node.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/lifecycle","example.com/team","example.com/old"]`}
		util.CreateNode(tCtx, t, cs, node)
		pin("stale-pod", "spot-stale")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "stale-pod", pool.StaleLabel.String(), bindTimeout)
		util.PatchNode(tCtx, t, cs, "spot-stale", `{"metadata":{"labels":{"example.com/old":null}}}`)
		util.WaitForPodBound(tCtx, t, cs, ns, "stale-pod", bindTimeout)
	})

	t.Run("malformed managed-labels annotation", func(t *testing.T) {
		node := util.Node("spot-malformed", with(ready, poolKey, "spot", "example.com/lifecycle", "spot", "example.com/team", "data")).Obj()
		node.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/lifecycle",`}
		util.CreateNode(tCtx, t, cs, node)
		pin("malformed-pod", "spot-malformed")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "malformed-pod", pool.MalformedAnnotation.String(), bindTimeout)
		util.PatchNode(tCtx, t, cs, "spot-malformed", `{"metadata":{"annotations":{"`+pool.ManagedLabelsAnnotation+`":"[\"example.com/lifecycle\",\"example.com/team\"]"}}}`)
		util.WaitForPodBound(tCtx, t, cs, ns, "malformed-pod", bindTimeout)
	})

	t.Run("unknown pool is rejected once a NodePoolLabelSet exists", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("no-pool", ready).Obj())
		pin("no-pool-pod", "no-pool")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "no-pool-pod", pool.UnknownPool.String(), bindTimeout)
		// A pool without a NodePoolLabelSet has nothing to wait for.
		util.PatchNode(tCtx, t, cs, "no-pool", `{"metadata":{"labels":{"kubernetes.azure.com/agentpool":"general"}}}`)
		util.WaitForPodBound(tCtx, t, cs, ns, "no-pool-pod", bindTimeout)
	})

	t.Run("missing required label key", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("no-domain", map[string]string{poolKey: "general"}).Obj())
		pin("no-domain-pod", "no-domain")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "no-domain-pod", pool.MissingRequiredLabel.String(), bindTimeout)
		util.PatchNode(tCtx, t, cs, "no-domain", fmt.Sprintf(`{"metadata":{"labels":{%q:"2"}}}`, updateDomainKey))
		util.WaitForPodBound(tCtx, t, cs, ns, "no-domain-pod", bindTimeout)
	})

	t.Run("NodePoolLabelSet update makes a node not ready again", func(t *testing.T) {
		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "gpu", map[string]string{"example.com/gpu": "a100"}))
		util.CreateNode(tCtx, t, cs, util.Node("gpu-0", with(ready, poolKey, "gpu", "example.com/gpu", "a100")).Obj())
		pin("gpu-before", "gpu-0")
		util.WaitForPodBound(tCtx, t, cs, ns, "gpu-before", bindTimeout)

		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "gpu", map[string]string{"example.com/gpu": "h100"}))
		pin("gpu-after", "gpu-0")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "gpu-after", pool.LabelsNotApplied.String(), bindTimeout)

		// Reverting the set (no node change at all) must requeue the pod through the
		// NodePoolLabelSet queueing hint.
		start := time.Now()
		util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(labelSetNS, "gpu", map[string]string{"example.com/gpu": "a100"}))
		util.WaitForPodBound(tCtx, t, cs, ns, "gpu-after", bindTimeout)
		t.Logf("set-change-to-bind latency: %v", time.Since(start))
	})

	t.Run("deleting the NodePoolLabelSet releases its pool", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("gpu-1", with(ready, poolKey, "gpu")).Obj())
		pin("gpu-1-pod", "gpu-1")
		util.WaitForPodUnschedulable(tCtx, t, cs, ns, "gpu-1-pod", pool.LabelsNotApplied.String(), bindTimeout)
		util.DeleteLabelSet(tCtx, t, cp, labelSetNS, "gpu")
		util.WaitForPodBound(tCtx, t, cs, ns, "gpu-1-pod", bindTimeout)
	})
}

// waitForUnreadyNodes waits until NodePoolReady's census counts want nodes that are not ready.
func waitForUnreadyNodes(tCtx context.Context, t *testing.T, want float64) {
	t.Helper()
	const name = "pool_scheduler_nodepoolready_unready_nodes"
	var got float64
	err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, bindTimeout, true, func(context.Context) (bool, error) {
		got, _ = gaugeValue(t, name)
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("%s = %v, want %v", name, got, want)
	}
}
