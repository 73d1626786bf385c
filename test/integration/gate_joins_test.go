package integration

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/test/utils/ktesting"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/pool-scheduler/pool-scheduler/cmd/pool-labeler/app"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// gateJoins is a burst of joins into a cluster that already runs: existing nodes of a pool with a
// set, settled (labels applied, taint lifted, condition written), then joins nodes of another
// pool created at once with the startup taint and only their pool label, while pods of both
// schedulers, pinned to that pool, wait for them: two per joining node, each pod sized to half a
// node (3 of its 8 CPUs), as a cluster autoscaler sizes a scale-up to the pods it is for.
type gateJoins struct {
	existing, joins int
	// qps and burst are the labeler's client rate (--kube-api-qps, --kube-api-burst).
	qps   float32
	burst int
	// ungated is the baseline, the default scheduler alone: the joins carry no startup taint,
	// no labeler runs for them and only the default scheduler runs, its pods all of them.
	ungated bool
	// timeout bounds each wait (for the settling, the pods' binding, the lifts).
	timeout time.Duration
}

// gateJoinsResult is what a burst of joins measured.
type gateJoinsResult struct {
	// early are pods bound to a node before the version of it without the startup taint (by
	// resourceVersion, etcd's one order of every object), to a node never lifted, or to one
	// lifted without its set's labels.
	early []string
	// unbound are pods not bound at the timeout; unlifted, joined nodes still tainted.
	unbound, unlifted int
	// labelToBind is, per scheduler (simulate's mode name) and pod, its node's lift (labels and
	// lift are one write) to its binding; joinToBind, its node's creation to its binding;
	// joinToLift, per joined node, its creation to its lift; lastLift, from just before the
	// first creation to the last lift. All as the watches saw them.
	labelToBind, joinToBind map[string][]time.Duration
	joinToLift              []time.Duration
	lastLift                time.Duration
	// nodePatches and statusPatches are the API server's count of PATCH on nodes and
	// nodes/status during the joins, per joined node (nothing else writes nodes meanwhile).
	nodePatches, statusPatches float64
	// apiP99 is, per request kind, the API server's own request latency p99 during the joins
	// (apiserver_request_duration_seconds, the upper bound of its bucket).
	apiP99 map[string]time.Duration
}

// The request kinds whose latency a burst of joins reports: the labeler's writes and the
// schedulers' bindings, which share the API server with them.
var gateJoinsRequests = []apiRequest{
	{verb: "PATCH", resource: "nodes"},
	{verb: "PATCH", resource: "nodes", subresource: "status"},
	{verb: "POST", resource: "pods", subresource: "binding"},
}

type apiRequest struct{ verb, resource, subresource string }

func (r apiRequest) String() string {
	if r.subresource == "" {
		return r.verb + " " + r.resource
	}
	return r.verb + " " + r.resource + "/" + r.subresource
}

// runGateJoins runs g with both schedulers in process (their shipped profiles, each its own
// scheduler and cache, as two processes) and the labeler controller in process with the shipped
// configuration's rule and g's client rate.
func runGateJoins(tCtx context.Context, tb testing.TB, cp *controlplane.ControlPlane, g gateJoins) gateJoinsResult {
	tb.Helper()
	cs := cp.Client
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: churnNS}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	const steady, burst = "steady", "burst"
	for _, p := range []string{steady, burst} {
		util.MustApplyLabelSet(tCtx, tb, cp, util.LabelSet(churnNS, p, map[string]string{"example.com/tier": p}))
	}
	poolNode := func(name, p string, taints ...v1.Taint) *v1.Node {
		return util.Node(name, map[string]string{util.AgentPoolKey: p, "kubernetes.azure.com/mode": "user"}).Taints(taints).Obj()
	}
	createNodes(tCtx, tb, cs, g.existing, func(i int) *v1.Node {
		return poolNode(fmt.Sprintf("aks-%s-12345678-vmss%06d", steady, i), steady, startupTaint)
	})

	// The existing nodes settle under a labeler as fast as the test's client, which then stops:
	// the cluster already ran before the burst.
	opts := util.ShippedLabelerOptions(tb)
	stopWarm := util.RunLabelerAs(tb, cp.Config, opts)
	defer stopWarm() // at a Fatalf below; stopping twice is harmless
	if orphans := waitSettledEvery(tCtx, cs, cp, opts, time.Second, g.timeout); len(orphans) > 0 {
		tb.Fatalf("the existing nodes did not settle: %d orphans: %s", len(orphans), summarizeNames(orphans))
	}
	stopWarm()

	modes, err := simulate.Modes()
	if err != nil {
		tb.Fatal(err)
	}
	if g.ungated {
		modes = modes[:1] // the default scheduler's
	}
	for _, m := range modes {
		util.StartScheduler(tb, cp, m.Profile)
	}
	podNS := util.CreateNamespace(tCtx, tb, cs, "joins")
	var pods []string
	schedulerOf := map[string]string{}
	for _, m := range modes {
		for i := range 2 * g.joins / len(modes) {
			name := fmt.Sprintf("%s-%d", m.Name, i)
			util.CreatePod(tCtx, tb, cs, util.Pod(podNS, name).SchedulerName(m.Profile.SchedulerName).Req(map[v1.ResourceName]string{v1.ResourceCPU: "3"}).
				NodeSelector(map[string]string{util.AgentPoolKey: burst}).Obj())
			pods = append(pods, name)
			schedulerOf[name] = m.Name
		}
	}
	// Every pod has found no node and its first backoff (1 s) has passed: how soon it binds is
	// up to its scheduler's reaction to the nodes, not to a backoff it started before.
	if err := wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, g.timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(podNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		waiting := 0
		for i := range list.Items {
			if util.UnschedulableWith(&list.Items[i], "") {
				waiting++
			}
		}
		return waiting == len(pods), nil
	}); err != nil {
		tb.Fatalf("the pods did not all wait for the pool's nodes: %v", err)
	}
	time.Sleep(1100 * time.Millisecond)

	if !g.ungated {
		// The labeler measured, with g's client rate.
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.Burst = g.qps, g.burst
		reconciled, _ := labelerNodeQueue(tb)
		stop := util.RunLabelerAs(tb, cfg, opts)
		defer stop()
		// It has reconciled the existing nodes (writing nothing) before the burst.
		if err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, g.timeout, true, func(context.Context) (bool, error) {
			total, depth := labelerNodeQueue(tb)
			return total-reconciled >= float64(g.existing) && depth == 0, nil
		}); err != nil {
			tb.Fatalf("the labeler's node queue did not drain before the joins: %v", err)
		}
	}

	type seen struct {
		rv uint64
		at time.Time
	}
	var mu sync.Mutex
	created, lifted := map[string]time.Time{}, map[string]seen{}
	// unlabelledLift: nodes whose lift came without the set's labels; conditioned: nodes with
	// the labeler's condition (its second write).
	unlabelledLift, conditioned := map[string]bool{}, map[string]bool{}
	bound, boundTo := map[string]seen{}, map[string]string{}
	rvOf := func(o metav1.Object) uint64 {
		rv, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		return rv
	}
	nodeWatch, err := cs.CoreV1().Nodes().Watch(tCtx, metav1.ListOptions{LabelSelector: util.AgentPoolKey + "=" + burst})
	if err != nil {
		tb.Fatal(err)
	}
	defer nodeWatch.Stop()
	podWatch, err := cs.CoreV1().Pods(podNS).Watch(tCtx, metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer podWatch.Stop()
	go func() {
		for ev := range nodeWatch.ResultChan() {
			node, ok := ev.Object.(*v1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			mu.Lock()
			if ev.Type == watch.Added {
				created[node.Name] = now
			}
			if _, done := lifted[node.Name]; !done && !hasTaint(node, pool.StartupTaintKey) {
				lifted[node.Name] = seen{rvOf(node), now}
				unlabelledLift[node.Name] = !g.ungated && node.Labels["example.com/tier"] != burst
			}
			if condition(node) != nil {
				conditioned[node.Name] = true
			}
			mu.Unlock()
		}
	}()
	go func() {
		for ev := range podWatch.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok || pod.Spec.NodeName == "" {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, done := bound[pod.Name]; !done {
				bound[pod.Name], boundTo[pod.Name] = seen{rvOf(pod), now}, pod.Spec.NodeName
			}
			mu.Unlock()
		}
	}()

	beforeWrites, beforeLatency := nodeWrites(tCtx, tb, cs), requestLatencies(tCtx, tb, cs)
	start := time.Now()
	var joinTaints []v1.Taint
	if !g.ungated {
		joinTaints = []v1.Taint{startupTaint}
	}
	createNodes(tCtx, tb, cs, g.joins, func(i int) *v1.Node {
		return poolNode(fmt.Sprintf("aks-%s-12345678-vmss%06d", burst, i), burst, joinTaints...)
	})
	_ = wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, g.timeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		// The condition is the labeler's second write: counted only once it has landed.
		return len(bound) == len(pods) && len(lifted) == g.joins && (g.ungated || len(conditioned) == g.joins), nil
	})
	afterWrites, afterLatency := nodeWrites(tCtx, tb, cs), requestLatencies(tCtx, tb, cs)

	mu.Lock()
	defer mu.Unlock()
	res := gateJoinsResult{
		unbound:       len(pods) - len(bound),
		unlifted:      g.joins - len(lifted),
		nodePatches:   (afterWrites.nodes - beforeWrites.nodes) / float64(g.joins),
		statusPatches: (afterWrites.status - beforeWrites.status) / float64(g.joins),
		apiP99:        map[string]time.Duration{},
		labelToBind:   map[string][]time.Duration{},
		joinToBind:    map[string][]time.Duration{},
	}
	for _, p := range pods {
		b, ok := bound[p]
		if !ok {
			continue
		}
		l, ok := lifted[boundTo[p]]
		if !ok || b.rv < l.rv || unlabelledLift[boundTo[p]] {
			res.early = append(res.early, fmt.Sprintf("%s on %s (bound at revision %d, lifted at %d)", p, boundTo[p], b.rv, l.rv))
			continue
		}
		res.labelToBind[schedulerOf[p]] = append(res.labelToBind[schedulerOf[p]], b.at.Sub(l.at))
		res.joinToBind[schedulerOf[p]] = append(res.joinToBind[schedulerOf[p]], b.at.Sub(created[boundTo[p]]))
	}
	for name, l := range lifted {
		if c, ok := created[name]; ok {
			res.joinToLift = append(res.joinToLift, l.at.Sub(c))
		}
		res.lastLift = max(res.lastLift, l.at.Sub(start))
	}
	for _, r := range gateJoinsRequests {
		res.apiP99[r.String()] = histogramQuantile(beforeLatency[r], afterLatency[r], 0.99)
	}
	return res
}

// createNodes creates n nodes as a scale-up brings them: concurrently (util.Parallel).
func createNodes(ctx context.Context, tb testing.TB, cs kubernetes.Interface, n int, node func(i int) *v1.Node) {
	tb.Helper()
	util.Parallel(ctx, tb, n, func(i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		return err
	})
}

// waitSettledEvery is waitSettled polling every interval (a list of thousands of nodes is not
// for every 100 ms).
func waitSettledEvery(ctx context.Context, cs kubernetes.Interface, cp *controlplane.ControlPlane, opts labeler.Options, interval, timeout time.Duration) []string {
	var orphans []string
	_ = wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		o, err := orphanedState(ctx, cs, cp, opts.Gate, opts.Namespaces)
		if err != nil {
			return false, nil
		}
		orphans = o
		return len(o) == 0, nil
	})
	return orphans
}

// labelerNodeQueue is what the labeler's node controller has done and has to do: its reconciles
// so far (controller-runtime's controller_runtime_reconcile_total) and the depth of its queue
// (workqueue_depth), both by the controller's name, "node".
func labelerNodeQueue(tb testing.TB) (reconciles, depth float64) {
	tb.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			named := false
			for _, l := range m.GetLabel() {
				named = named || (l.GetName() == "name" || l.GetName() == "controller") && l.GetValue() == "node"
			}
			switch {
			case !named:
			case mf.GetName() == "controller_runtime_reconcile_total":
				reconciles += m.GetCounter().GetValue()
			case mf.GetName() == "workqueue_depth":
				depth += m.GetGauge().GetValue()
			}
		}
	}
	return reconciles, depth
}

// requestLatencies is the API server's apiserver_request_duration_seconds histogram per request
// kind of gateJoinsRequests: the cumulative count per bucket upper bound.
func requestLatencies(ctx context.Context, tb testing.TB, cs kubernetes.Interface) map[apiRequest]map[float64]float64 {
	tb.Helper()
	metrics := util.APIServerMetrics(ctx, tb, cs)
	out := map[apiRequest]map[float64]float64{}
	for _, s := range metrics["apiserver_request_duration_seconds_bucket"] {
		r := apiRequest{string(s.Metric["verb"]), string(s.Metric["resource"]), string(s.Metric["subresource"])}
		if !slices.Contains(gateJoinsRequests, r) {
			continue
		}
		le, err := strconv.ParseFloat(string(s.Metric["le"]), 64)
		if err != nil {
			tb.Fatal(err)
		}
		if out[r] == nil {
			out[r] = map[float64]float64{}
		}
		out[r][le] += float64(s.Value) // summed over the other labels (version, component, scope)
	}
	return out
}

// histogramQuantile is the upper bound of the bucket holding quantile q of the requests between
// two readings of a cumulative histogram; 0 without requests.
func histogramQuantile(before, after map[float64]float64, q float64) time.Duration {
	bounds := make([]float64, 0, len(after))
	for le := range after {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total == 0 {
		return 0
	}
	for _, le := range bounds {
		if after[le]-before[le] >= q*total {
			if math.IsInf(le, 1) {
				return time.Duration(math.MaxInt64)
			}
			return time.Duration(le * float64(time.Second))
		}
	}
	return time.Duration(math.MaxInt64)
}

// TestGateJoins (#60): nodes join a running cluster at once with the startup taint while pods of
// both schedulers wait for their pool; the labeler has the shipped binary's client rate. No pod
// binds to a node before its labels, every pod binds and every node is lifted, with one node
// patch and one status patch per join. The smoke of BenchmarkGateJoins, which measures the same
// at 5000 nodes.
func TestGateJoins(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	res := runGateJoins(tCtx, t, cp, gateJoins{existing: 50, joins: 20, qps: app.DefaultKubeAPIQPS, burst: app.DefaultKubeAPIBurst, timeout: labelerTimeout})
	if len(res.early) > 0 {
		t.Errorf("pods bound to nodes before their labels: %q", res.early)
	}
	if res.unbound > 0 || res.unlifted > 0 {
		t.Errorf("%d pods not bound, %d joined nodes still tainted", res.unbound, res.unlifted)
	}
	if res.nodePatches != 1 || res.statusPatches != 1 {
		t.Errorf("per join: %.2f node patches and %.2f status patches, want 1 of each", res.nodePatches, res.statusPatches)
	}
	if len(res.labelToBind) != 2 {
		t.Errorf("pods bound for %d schedulers, want both", len(res.labelToBind))
	}
	for name, d := range res.labelToBind {
		t.Logf("%s: label-to-bind p99 %v, join-to-bind p99 %v", name, percentile(d, 0.99), percentile(res.joinToBind[name], 0.99))
	}
	t.Logf("join-to-lift p99 %v, API p99 %v", percentile(res.joinToLift, 0.99), res.apiP99)
}

// BenchmarkGateJoins (#60): 500 nodes join a cluster of 5000 at once with the startup taint while
// 500 pods of each scheduler wait for them (two per node, each half a node), with the labeler at
// client-go's rate (what the binary had before --kube-api-qps) and at the shipped one, and the
// baseline: the default scheduler alone, no taint and no labeler. Reports early placements
// (goal 0), per scheduler label-to-bind (goal p99 <= 100 ms) and join-to-bind, join-to-lift, the
// last lift, and the API server's p99 for the labeler's writes and the schedulers' bindings. Run:
//
//	PATH=$PWD/bin:$PATH GOFLAGS="'-gcflags=all=-l -dwarf=false'" go test -run '^$' -bench BenchmarkGateJoins -benchtime 1x -timeout 60m ./test/integration/
func BenchmarkGateJoins(b *testing.B) {
	cases := []struct {
		name    string
		qps     float32
		burst   int
		ungated bool
	}{
		{name: "default-alone", ungated: true},
		{name: "client-go-5qps", qps: 5, burst: 10},
		{name: "shipped", qps: app.DefaultKubeAPIQPS, burst: app.DefaultKubeAPIBurst},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				func() {
					tCtx := ktesting.Init(b)
					cp := util.StartControlPlane(b)
					res := runGateJoins(tCtx, b, cp, gateJoins{existing: 5000, joins: 500, qps: c.qps, burst: c.burst, ungated: c.ungated, timeout: 10 * time.Minute})
					if len(res.early) > 0 {
						b.Errorf("pods bound to nodes before their labels: %s", summarizeNames(res.early))
					}
					b.ReportMetric(float64(len(res.early)), "early")
					b.ReportMetric(float64(res.unbound+res.unlifted), "left")
					for name, d := range res.labelToBind {
						b.ReportMetric(float64(percentile(d, 0.5).Milliseconds()), name+"-label-to-bind-p50-ms")
						b.ReportMetric(float64(percentile(d, 0.99).Milliseconds()), name+"-label-to-bind-p99-ms")
						b.ReportMetric(percentile(res.joinToBind[name], 0.5).Seconds(), name+"-join-to-bind-p50-s")
						b.ReportMetric(percentile(res.joinToBind[name], 0.99).Seconds(), name+"-join-to-bind-p99-s")
					}
					b.ReportMetric(percentile(res.joinToLift, 0.5).Seconds(), "join-to-lift-p50-s")
					b.ReportMetric(percentile(res.joinToLift, 0.99).Seconds(), "join-to-lift-p99-s")
					b.ReportMetric(res.lastLift.Seconds(), "last-lift-s")
					b.ReportMetric(float64(res.apiP99["PATCH nodes"].Milliseconds()), "patch-nodes-p99-ms")
					b.ReportMetric(float64(res.apiP99["PATCH nodes/status"].Milliseconds()), "patch-status-p99-ms")
					b.ReportMetric(float64(res.apiP99["POST pods/binding"].Milliseconds()), "binding-p99-ms")
				}()
			}
		})
	}
}
