package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// writesGoal is #47's goal: pool-scheduler's writes to pods per created pod at most this many
// times the default scheduler's on the same workload.
const writesGoal = 1.05

// writeCounts are the API server's own counts of write requests (apiserver_request_total, every
// verb but GET, LIST, WATCH and CONNECT), per "VERB resource" or "VERB resource/subresource".
type writeCounts map[string]float64

// scrapeWrites reads the API server's write requests so far, from its /metrics.
func scrapeWrites(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) writeCounts {
	t.Helper()
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	// component-base's parser: the same on both release lines (prometheus/common's zero
	// TextParser panics from v0.67, the 1.36 line's).
	metrics := testutil.NewMetrics()
	if err := testutil.ParseMetrics(string(raw), &metrics); err != nil {
		t.Fatalf("parsing the API server's metrics: %v", err)
	}
	out := writeCounts{}
	for _, sample := range metrics["apiserver_request_total"] {
		labels := sample.Metric
		switch labels["verb"] {
		case "GET", "LIST", "WATCH", "CONNECT":
			continue
		}
		key := string(labels["verb"] + " " + labels["resource"])
		if labels["subresource"] != "" {
			key += "/" + string(labels["subresource"])
		}
		out[key] += float64(sample.Value)
	}
	return out
}

func (w writeCounts) minus(before writeCounts) writeCounts {
	out := writeCounts{}
	for k, v := range w {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// pods sums the writes to pods and their subresources (binding, status, eviction).
func (w writeCounts) pods() float64 {
	var n float64
	for k, v := range w {
		if _, res, _ := strings.Cut(k, " "); res == "pods" || strings.HasPrefix(res, "pods/") {
			n += v
		}
	}
	return n
}

// resource sums the writes to one resource (no subresource).
func (w writeCounts) resource(name string) float64 {
	var n float64
	for k, v := range w {
		if _, res, _ := strings.Cut(k, " "); res == name {
			n += v
		}
	}
	return n
}

func (w writeCounts) String() string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%.0f", k, w[k])
	}
	return strings.TrimSpace(b.String())
}

// waitQuiet returns once the API server has seen no write to pods for 3 seconds: the scheduler,
// the controllers and the spread keeper (which gathers a workload's changes for 1 s) are done
// with the last step.
func waitQuiet(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	last, since := -1.0, time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := scrapeWrites(ctx, t, cp).pods()
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 3*time.Second, nil
	}); err != nil {
		t.Fatalf("pods still written to after 2 minutes")
	}
}

// writesRun is one variant's figures over the same workload.
type writesRun struct {
	created, scaleDowns     int
	createWrites, downWrite writeCounts
	all                     writeCounts
	elapsed                 time.Duration
}

// runWritesWorkload creates a ReplicaSet of schedulerName's pods per round and scales it
// 18 -> 9 -> 4 -> 12 (TestScaleDownKeepsSpread's steps), waiting for every replica to be
// Running and the writes to settle after each step, and counts the API server's writes: those
// of the creation and scale-up steps, and those of the scale-downs.
func runWritesWorkload(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, schedulerName string, rounds int) writesRun {
	t.Helper()
	steps := []int32{18, 9, 4, 12}
	run := writesRun{createWrites: writeCounts{}, downWrite: writeCounts{}}
	add := func(into, d writeCounts) {
		for k, v := range d {
			into[k] += v
		}
	}
	start, begin := scrapeWrites(ctx, t, cp), time.Now()
	for range rounds {
		ns := util.CreateNamespace(ctx, t, cp.Client, "writes")
		rs := util.ReplicaSet(ns, "web", steps[0])
		rs.Spec.Template.Spec.SchedulerName = schedulerName
		waitQuiet(ctx, t, cp)
		for i, replicas := range steps {
			before := scrapeWrites(ctx, t, cp)
			if i == 0 {
				if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				util.ScaleReplicaSet(ctx, t, cp.Client, ns, "web", replicas)
			}
			util.WaitForReplicas(ctx, t, cp.Client, ns, "web", int(replicas), 2*time.Minute)
			waitQuiet(ctx, t, cp)
			d := scrapeWrites(ctx, t, cp).minus(before)
			if i > 0 && replicas < steps[i-1] {
				run.scaleDowns++
				add(run.downWrite, d)
				continue
			}
			add(run.createWrites, d)
		}
		// Free the nodes for the next round and variant (outside the steps' counts).
		util.ScaleReplicaSet(ctx, t, cp.Client, ns, "web", 0)
		util.WaitForReplicas(ctx, t, cp.Client, ns, "web", 0, 2*time.Minute)
	}
	run.elapsed = time.Since(begin)
	run.all = scrapeWrites(ctx, t, cp).minus(start)
	// Pods created: the ReplicaSet controller's creations, counted by the API server.
	run.created = int(run.createWrites["POST pods"])
	return run
}

// TestAPIWritesPerPod (#47): the same workload (a ReplicaSet created with 18 replicas and scaled
// to 9, 4 and 12, over 3 zones x 3 update domains x 2 hosts, by the upstream ReplicaSet
// controller, pods made Running by a kubelet stand-in) scheduled first by the default scheduler
// (bin/pool-scheduler with kube-scheduler's default profile, leader-elected as kube-scheduler
// is), then by pool-scheduler as installed (bin/pool-scheduler with the shipped configuration
// and bin/pool-labeler spread, the deletion-cost keeper, as the chart runs them), counted by the
// API server itself (apiserver_request_total). It fails when pool-scheduler's writes to pods
// per created pod exceed the default scheduler's by more than writesGoal. Writes to Leases and
// events are printed, not judged (Leases are renewed per time, not per pod).
// POOL_SCHEDULER_WRITES_ROUNDS=N runs N rounds per variant (docs/performance.md's figures).
func TestAPIWritesPerPod(t *testing.T) {
	tCtx := ktesting.Init(t)
	rounds := 1
	if v := os.Getenv("POOL_SCHEDULER_WRITES_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("POOL_SCHEDULER_WRITES_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	cp := util.StartControlPlane(t)
	util.CreateSpreadNodes(tCtx, t, cp.Client, 3, 3, 2)
	util.StartReplicaSetController(t, cp)
	util.StartKubelet(t, cp.Client)
	const ns = "pool-scheduler"
	if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	upstream := util.UpstreamConfigFor(t, cp)
	upstream["leaderElection"] = map[string]any{"leaderElect": true, "resourceNamespace": "kube-system", "resourceName": "kube-scheduler"}
	defaultScheduler := util.StartSchedulerBinary(t, upstream)
	base := runWritesWorkload(tCtx, t, cp, v1.DefaultSchedulerName, rounds)
	defaultScheduler.Kill(t)

	kubeconfig := upstream["clientConnection"].(map[string]any)["kubeconfig"].(string)
	util.StartSchedulerBinary(t, util.ShippedConfigFor(t, cp))
	util.StartProcess(t, util.LabelerBinary(t), "spread", "--kubeconfig="+kubeconfig, "--config="+util.ShippedConfigPath(),
		"--leader-elect-namespace="+ns, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	ours := runWritesWorkload(tCtx, t, cp, util.SchedulerName, rounds)

	perCreated := func(r writesRun) float64 { return r.createWrites.pods() / float64(r.created) }
	perDown := func(r writesRun) float64 { return r.downWrite.pods() / float64(r.scaleDowns) }
	leasesPerMinute := func(r writesRun) float64 { return r.all.resource("leases") / r.elapsed.Minutes() }
	for _, r := range []struct {
		name string
		run  writesRun
	}{{"default scheduler", base}, {"pool-scheduler", ours}} {
		t.Logf("%s: %d pods created, %.2f writes to pods per created pod, %.2f per scale-down, %.1f Lease writes per minute; created and scaled up: %s; scaled down: %s",
			r.name, r.run.created, perCreated(r.run), perDown(r.run), leasesPerMinute(r.run), r.run.createWrites, r.run.downWrite)
	}
	if base.created == 0 || ours.created != base.created {
		t.Fatalf("pods created: default %d, pool-scheduler %d; want the same workload", base.created, ours.created)
	}
	ratio := perCreated(ours) / perCreated(base)
	t.Logf("writes to pods per created pod: %.3fx the default scheduler's (goal <= %.2fx); per scale-down: %.2f against %.2f",
		ratio, writesGoal, perDown(ours), perDown(base))
	if ratio > writesGoal {
		t.Errorf("pool-scheduler wrote %.3fx the default scheduler's writes to pods per created pod, want at most %.2fx", ratio, writesGoal)
	}
	if perDown(ours) > perDown(base) {
		t.Errorf("pool-scheduler's scale-downs wrote %.2f to pods each, the default scheduler's %.2f: want no extra write", perDown(ours), perDown(base))
	}
}
