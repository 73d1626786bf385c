// Package installed measures pool-scheduler as users install it: bin/pool-scheduler as a child
// process with the shipped configuration (manifests/scheduler/config.yaml, only the kubeconfig
// and leader election changed) against a real kube-apiserver and etcd, beside the upstream
// kube-scheduler of the same Kubernetes version (bin/kube-scheduler, `make kube-scheduler`), on
// the same cluster in the same run. docs/performance.md reports what it measured.
package installed

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/integration/framework"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

func TestMain(m *testing.M) {
	// The apiserver runs in this process: with $ARTIFACTS set (make bench, make perf-smoke) its
	// log goes to a file there instead of between the benchmark lines.
	if dir := os.Getenv("ARTIFACTS"); dir != "" {
		f, err := os.Create(filepath.Join(dir, "installed-apiserver.log"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// Not even errors on stderr: stopping a scheduler abandons its requests in flight,
		// which the apiserver logs as errors.
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		if err := errors.Join(fs.Set("logtostderr", "false"), fs.Set("stderrthreshold", "FATAL")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		klog.SetOutput(f)
	}
	framework.EtcdMain(m.Run)
}

// A variant is one scheduler command with its --config.
type variant struct {
	name string
	// schedulerName is what the variant's pods set in spec.schedulerName.
	schedulerName string
	binary        func(testing.TB) string
	config        func(testing.TB, *controlplane.ControlPlane) map[string]any
}

// variants, in the order of the first round; later rounds rotate it. The pair the goal compares
// (pool-scheduler against default-unthrottled) runs back to back.
var variants = []variant{
	// The upstream kube-scheduler without a client-side rate limit: what its scheduling loop does.
	{name: "default-unthrottled", schedulerName: v1.DefaultSchedulerName, binary: util.KubeSchedulerBinary, config: unthrottled(upstreamConfig)},
	// pool-scheduler as shipped.
	{name: "pool-scheduler", schedulerName: util.SchedulerName, binary: util.SchedulerBinary, config: shippedConfig},
	// pool-scheduler without a client-side rate limit: what the shipped limit costs.
	{name: "pool-scheduler-unthrottled", schedulerName: util.SchedulerName, binary: util.SchedulerBinary, config: unthrottled(shippedConfig)},
	// The upstream kube-scheduler with its defaults (50 QPS, burst 100).
	{name: "default", schedulerName: v1.DefaultSchedulerName, binary: util.KubeSchedulerBinary, config: upstreamConfig},
}

// upstreamConfig is util.UpstreamConfigFor.
var upstreamConfig = util.UpstreamConfigFor

// shippedConfig is manifests/scheduler/config.yaml with the kubeconfig pointing at the test
// apiserver and leader election off, as for the upstream variants: one scheduler process runs at
// a time, and a Lease left by the previous one would hold the next back for its duration.
func shippedConfig(tb testing.TB, cp *controlplane.ControlPlane) map[string]any {
	tb.Helper()
	doc := util.ShippedConfigFor(tb, cp)
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	return doc
}

// unthrottled removes the client-side rate limit from a configuration: with a negative QPS,
// client-go builds no rate limiter (k8s.io/client-go/rest.Config.QPS).
func unthrottled(config func(testing.TB, *controlplane.ControlPlane) map[string]any) func(testing.TB, *controlplane.ControlPlane) map[string]any {
	return func(tb testing.TB, cp *controlplane.ControlPlane) map[string]any {
		doc := config(tb, cp)
		doc["clientConnection"].(map[string]any)["qps"] = -1
		return doc
	}
}

type workload struct {
	name        string
	nodes, pods int
}

var workloads = []workload{
	// make test's perf-smoke: the benchmark and every variant work (no figure is read from it).
	{name: "smoke", nodes: 20, pods: 100},
	{name: "500Nodes", nodes: 500, pods: 2000},
	{name: "5000Nodes", nodes: 5000, pods: 2000},
}

const (
	// creators is how many clients create a burst's pods at once.
	creators = 16
	// replicas is the number of pods per workload (one controller owner each), as in test/perf.
	replicas = 5
	// burstTimeout bounds a burst; kube-scheduler's default client limit binds 2000 pods in ~40 s.
	burstTimeout = 10 * time.Minute
)

// BenchmarkInstalled creates a burst of pods (by 16 clients at once) for each variant in turn,
// on one cluster, with only that variant's scheduler process running, and reports per variant:
// throughput (pods / time from the first create request to the last bind the pod watch saw),
// the p50 and p99 of each pod's create-to-bind latency, and the ratios of pool-scheduler to the
// other variants. Each iteration (-benchtime=Nx) is one round of every variant, the order
// rotated by one per round; the metrics are means over the rounds. Between variants the
// scheduler is stopped and the burst's pods deleted, so every burst starts on the same cluster.
func BenchmarkInstalled(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) { benchmarkWorkload(b, w) })
	}
}

func benchmarkWorkload(b *testing.B, w workload) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	cp := util.StartControlPlane(b)
	createCluster(ctx, b, cp, w.nodes)

	results := map[string][]burstResult{}
	round := 0
	for b.Loop() {
		var summary []string
		for i := range variants {
			v := variants[(round+i)%len(variants)]
			r := runBurst(ctx, b, cp, v, w.pods)
			results[v.name] = append(results[v.name], r)
			summary = append(summary, fmt.Sprintf("%s %.1f pods/s (p50 %v, p99 %v)", v.name, r.podsPerSecond, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond)))
		}
		round++
		// One line per round: go test shows only the first lines of a benchmark's log.
		b.Logf("round %d: %s", round, strings.Join(summary, ", "))
	}

	b.ReportMetric(float64(w.nodes), "nodes")
	b.ReportMetric(float64(w.pods), "pods")
	b.ReportMetric(float64(round), "rounds")
	throughput := map[string]float64{}
	for _, v := range variants {
		var rate, p50, p99 float64
		for _, r := range results[v.name] {
			rate += r.podsPerSecond
			p50 += float64(r.p50) / float64(time.Millisecond)
			p99 += float64(r.p99) / float64(time.Millisecond)
		}
		n := float64(len(results[v.name]))
		throughput[v.name] = rate / n
		b.ReportMetric(rate/n, v.name+"-pods/s")
		b.ReportMetric(p50/n, v.name+"-p50-ms")
		b.ReportMetric(p99/n, v.name+"-p99-ms")
	}
	for _, pair := range [][2]string{
		{"pool-scheduler", "default-unthrottled"}, // the goal: >= 0.9
		{"pool-scheduler", "default"},
		{"pool-scheduler", "pool-scheduler-unthrottled"}, // what the shipped client limit costs
		{"default", "default-unthrottled"},               // what kube-scheduler's defaults cost
	} {
		b.ReportMetric(throughput[pair[0]]/throughput[pair[1]], "ratio-"+pair[0]+"/"+pair[1])
	}
}

// Nodes as in test/perf/templates/node.yaml: every 20th a system node (pool "system", with a
// PreferNoSchedule taint), the others user nodes, over 2 fault domains x 3 update domains, each
// carrying its pool's NodePoolLabelSet labels (ready for NodePoolReady).
const labelSetKey = "example.com/pool-labels"

func createCluster(ctx context.Context, b *testing.B, cp *controlplane.ControlPlane, nodes int) {
	b.Helper()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, pool := range []string{"system", "user"} {
		util.MustApplyLabelSet(ctx, b, cp, util.LabelSet("pool-scheduler", pool, map[string]string{labelSetKey: pool}))
	}
	start := time.Now()
	var once sync.Once
	var firstErr error
	workqueue.ParallelizeUntil(ctx, creators, nodes, func(i int) {
		pool := "user"
		if i%20 == 0 {
			pool = "system"
		}
		n := util.Node(fmt.Sprintf("node-%05d", i), map[string]string{
			"kubernetes.azure.com/agentpool":           pool,
			"kubernetes.azure.com/mode":                pool,
			"topology.kubernetes.io/zone":              fmt.Sprintf("fd-%d", i%2),
			"topology.pool-scheduler.io/update-domain": fmt.Sprintf("ud-%d", (i/2)%3),
			labelSetKey: pool,
		})
		if pool == "system" {
			n.Taints([]v1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}})
		}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n.Obj(), metav1.CreateOptions{}); err != nil {
			once.Do(func() { firstErr = err })
		}
	})
	if firstErr != nil {
		b.Fatalf("creating nodes: %v", firstErr)
	}
	b.Logf("%d nodes created in %v", nodes, time.Since(start).Round(time.Millisecond))
}

// burstPod is a pod of the workload with the given controller UID (as test/perf/templates/pod.yaml).
func burstPod(namespace, name, schedulerName string, workload types.UID) *v1.Pod {
	p := st.MakePod().Namespace(namespace).Name(name).SchedulerName(schedulerName).
		Label("workload", string(workload)).
		OwnerReference("set-"+string(workload), appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "100m", v1.ResourceMemory: "500Mi"}).Obj()
	p.OwnerReferences[0].UID = workload
	return p
}

type burstResult struct {
	podsPerSecond float64
	p50, p99      time.Duration
}

// runBurst starts the variant's scheduler, waits until it binds a warm-up pod (informers synced,
// caches warm), creates the burst and waits until every pod is bound; then stops the scheduler
// and deletes the pods.
func runBurst(ctx context.Context, b *testing.B, cp *controlplane.ControlPlane, v variant, pods int) burstResult {
	b.Helper()
	cs := cp.Client
	ns := util.CreateNamespace(ctx, b, cs, v.name)
	proc := util.StartSchedulerCommand(b, v.binary(b), v.config(b, cp))
	schedulerFailed := func(format string, args ...any) {
		b.Helper()
		out := proc.Output()
		if len(out) > 8000 {
			out = "..." + out[len(out)-8000:]
		}
		b.Fatalf("%s: %s\n%s output:\n%s", v.name, fmt.Sprintf(format, args...), v.name, out)
	}

	warmUp := burstPod(ns, "warm-up", v.schedulerName, uuid.NewUUID())
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, warmUp, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, errors.New("the scheduler exited")
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, warmUp.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
	if err != nil {
		schedulerFailed("warm-up pod not bound: %v", err)
	}

	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// On this loaded machine the apiserver closes watchers that fall behind ("unresponsive"); a
	// RetryWatcher resumes from the last resource version it saw, so no bind is missed (one seen
	// late only adds to its latency).
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, options)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	created := make([]time.Time, pods)
	bound := make([]time.Time, pods)
	boundCount := 0
	allBound := make(chan error, 1)
	go func() {
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				allBound <- apierrors.FromObject(ev.Object)
				return
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok || p.Spec.NodeName == "" || !strings.HasPrefix(p.Name, "pod-") {
				continue
			}
			i, err := strconv.Atoi(strings.TrimPrefix(p.Name, "pod-"))
			if err != nil || i >= pods || !bound[i].IsZero() {
				continue
			}
			bound[i] = now
			if boundCount++; boundCount == pods {
				allBound <- nil
				return
			}
		}
		allBound <- errors.New("pod watch closed")
	}()

	workloads := make([]types.UID, (pods+replicas-1)/replicas)
	for i := range workloads {
		workloads[i] = uuid.NewUUID()
	}
	var once sync.Once
	var createErr error
	workqueue.ParallelizeUntil(ctx, creators, pods, func(i int) {
		p := burstPod(ns, fmt.Sprintf("pod-%05d", i), v.schedulerName, workloads[i/replicas])
		created[i] = time.Now()
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			once.Do(func() { createErr = err })
		}
	})
	if createErr != nil {
		b.Fatalf("creating pods: %v", createErr)
	}
	select {
	case err := <-allBound:
		if err != nil {
			b.Fatalf("%s: watching pods: %v", v.name, err)
		}
	case <-time.After(burstTimeout):
		w.Stop()
		<-allBound // the watcher has stopped writing boundCount
		schedulerFailed("%d of %d pods bound after %v", boundCount, pods, burstTimeout)
	}

	first, last := created[0], bound[0]
	latencies := make([]time.Duration, pods)
	for i := range pods {
		if created[i].Before(first) {
			first = created[i]
		}
		if bound[i].After(last) {
			last = bound[i]
		}
		latencies[i] = bound[i].Sub(created[i])
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	res := burstResult{
		podsPerSecond: float64(pods) / last.Sub(first).Seconds(),
		p50:           percentile(latencies, 0.50),
		p99:           percentile(latencies, 0.99),
	}
	proc.Kill(b)
	// Pods bound to nodes without a kubelet go at once only with a zero grace period.
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("pods of %s not deleted: %v", ns, err)
	}
	return res
}

// percentile of sorted durations, by the nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
