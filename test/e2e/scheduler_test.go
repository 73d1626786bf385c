package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

const poolKey = "nodepool.banzaicloud.io/name"

// TestBinaryWithShippedConfig runs bin/pool-scheduler with manifests/scheduler/config.yaml (only
// the kubeconfig substituted, leader election on as shipped): it becomes leader, serves its
// probes, holds a pod off an unlabelled node and binds it once the labels land.
func TestBinaryWithShippedConfig(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	// The shipped config's leader-election Lease lives in the pool-scheduler namespace.
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "spot", map[string]string{"example.com/lifecycle": "spot"}))
	util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot"}).Obj())
	ns := util.CreateNamespace(tCtx, t, cs, "e2e")

	start := time.Now()
	proc := util.StartSchedulerBinary(t, util.ShippedConfigFor(t, cp))

	// Leader election on the shipped Lease.
	err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := cs.CoordinationV1().Leases("pool-scheduler").Get(ctx, "pool-scheduler", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Fatalf("no leader on Lease pool-scheduler/pool-scheduler: %v", err)
	}
	t.Logf("leader after %v", time.Since(start))

	util.CreatePod(tCtx, t, cs, util.Pod(ns, "web").Obj())
	util.WaitForPodUnschedulable(tCtx, t, cs, ns, "web", pool.LabelsNotApplied.String(), 30*time.Second)

	labelled := time.Now()
	util.PatchNode(tCtx, t, cs, "spot-0", `{"metadata":{"labels":{"example.com/lifecycle":"spot"}}}`)
	node := util.WaitForPodBound(tCtx, t, cs, ns, "web", 30*time.Second)
	t.Logf("bound to %s %v after the labels landed", node, time.Since(labelled))

	// The Deployment's probes.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get(proc.HTTPSURL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	// HTTP/1.1 only: the binary defaults --disable-http2-serving to true.
	util.RequireNoHTTP2(t, strings.TrimPrefix(proc.HTTPSURL, "https://"))
	if exited, err := proc.Wait(0); exited {
		t.Fatalf("scheduler exited: %v", err)
	}
	// From 1.35 on (OpportunisticBatching, KEP-5598) a profile with one Filter or Score plugin
	// that does not sign pods has batching turned off for every pod, and the framework says so
	// at startup (frameworkImpl.computeBatchablePlugins). Our plugins sign (sign_k8s136.go); on
	// the 1.34 line the framework has no signatures and never logs it.
	if out := proc.Output(); strings.Contains(out, "Disabling signatures for profile") {
		t.Errorf("the shipped profile turns OpportunisticBatching off:\n%s", grepLines(out, "Disabling signatures", 5))
	}
}

// TestBinaryComposesWithOtherPlugins enables plugins of other origins with args beside ours in
// the same profile: the binary starts and schedules. On every line that is an in-tree plugin
// (NodeResourcesBalancedAllocation); on a line that bundles scheduler-plugins
// (version.SchedulerPlugins, the 1.34 line) also one of those (NodeResourcesAllocatable). A line
// that bundles none (1.35 and later) composes with the in-tree plugin only, and its binary must
// refuse a profile enabling NodeResourcesAllocatable, naming it, as its --version says
// "scheduler-plugins none".
func TestBinaryComposesWithOtherPlugins(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	config := func(withSchedulerPlugins bool) map[string]any {
		doc := util.ShippedConfigFor(t, cp)
		doc["leaderElection"].(map[string]any)["leaderElect"] = false
		profile := doc["profiles"].([]any)[0].(map[string]any)
		multiPoint := profile["plugins"].(map[string]any)["multiPoint"].(map[string]any)
		multiPoint["enabled"] = append(multiPoint["enabled"].([]any),
			map[string]any{"name": "NodeResourcesBalancedAllocation"}) // in-tree
		profile["pluginConfig"] = append(profile["pluginConfig"].([]any), map[string]any{
			"name": "NodeResourcesBalancedAllocation",
			"args": map[string]any{"resources": []any{map[string]any{"name": "cpu", "weight": 1}, map[string]any{"name": "memory", "weight": 1}}},
		})
		if withSchedulerPlugins {
			multiPoint["enabled"] = append(multiPoint["enabled"].([]any),
				map[string]any{"name": "NodeResourcesAllocatable", "weight": 2}) // scheduler-plugins
			profile["pluginConfig"] = append(profile["pluginConfig"].([]any), map[string]any{
				"name": "NodeResourcesAllocatable",
				"args": map[string]any{"mode": "Least"},
			})
		}
		return doc
	}
	bundled := version.SchedulerPlugins != ""
	if !bundled {
		t.Logf("the %s line bundles no scheduler-plugins: composing with an in-tree plugin only", version.KubernetesLine())
		proc := util.StartSchedulerBinary(t, config(true))
		exited, err := proc.Wait(60 * time.Second)
		if !exited || err == nil || !strings.Contains(proc.Output(), "NodeResourcesAllocatable") {
			t.Fatalf("a profile enabling scheduler-plugins' NodeResourcesAllocatable on a line without it: exited %v (%v), want a non-zero exit naming the plugin; output:\n%s",
				exited, err, proc.Output())
		}
	}
	util.CreateNode(tCtx, t, cs, util.Node("n0", nil).Obj())
	ns := util.CreateNamespace(tCtx, t, cs, "compose")
	util.StartSchedulerBinary(t, config(bundled))
	util.CreatePod(tCtx, t, cs, util.Pod(ns, "p").Obj())
	util.WaitForPodBound(tCtx, t, cs, ns, "p", 60*time.Second)
}

// TestBinaryRefusesBadArgs checks that a bad plugin arg stops the binary with a non-zero exit
// and a message naming the field.
func TestBinaryRefusesBadArgs(t *testing.T) {
	cp := util.StartControlPlane(t)
	tests := []struct {
		name string
		edit func(args map[string]any)
		// wantInOutput must all appear in the output (structured logs escape quotes).
		wantInOutput []string
	}{
		{name: "unknown field", edit: func(a map[string]any) { a["requiredLabelKey"] = []string{"x"} }, wantInOutput: []string{"unknown field", "requiredLabelKey", "NodePoolReady"}},
		{name: "invalid policy", edit: func(a map[string]any) { a["unknownPoolPolicy"] = "Sometimes" }, wantInOutput: []string{"NodePoolReady", "args.unknownPoolPolicy", "Sometimes"}},
		{name: "invalid key", edit: func(a map[string]any) { a["requiredLabelKeys"] = []string{"not a key"} }, wantInOutput: []string{"NodePoolReady", "args.requiredLabelKeys[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			util.ExpectBadArgsRefused(t, cp, nodepoolready.Name, tt.edit, tt.wantInOutput)
		})
	}
}
