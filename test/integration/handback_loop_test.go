package integration

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestHandbackNeverLoops: the install without an admission path (kubectl apply -k manifests, or
// the chart with admission.mode none), every pod naming pool-scheduler in its template, with
// pool-scheduler down (no Lease) for longer than PoolSchedulerPodsWaiting needs to fire, the real
// ReplicaSet controller recreating what is deleted and the hand-off controller synced on a
// simulated clock: no pod of that install is deleted (admission handed none over); an owner
// whose replacements come back handed over again (a stuck admission path) loses its pod once and
// its replacement is reported, not deleted; a gated pod is neither counted nor touched; and the
// oldest-waiting gauge stays above PoolSchedulerPodsWaiting's threshold (read from
// manifests/monitoring/alerts.yaml) for the rule's whole `for`, so the alert fires.
func TestHandbackNeverLoops(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	util.StartReplicaSetController(t, cp)
	ns := util.CreateNamespace(tCtx, t, cs, "shop")
	threshold, forDuration := waitingAlert(t)

	// Deletions per owner, as the API reports them.
	var mu sync.Mutex
	deleted := map[string]int{}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*v1.Pod); ok {
			mu.Lock()
			deleted[metav1.GetControllerOf(p).Name]++
			mu.Unlock()
		}
	}}); err != nil {
		t.Fatal(err)
	}
	factory.Start(tCtx.Done())
	factory.WaitForCacheSync(tCtx.Done())

	replicaSet := func(name string, replicas int32, annotations map[string]string, gates ...string) {
		t.Helper()
		spec := v1.PodSpec{SchedulerName: "pool-scheduler", Containers: []v1.Container{{Name: "c", Image: "pause"}}}
		for _, g := range gates {
			spec.SchedulingGates = append(spec.SchedulingGates, v1.PodSchedulingGate{Name: g})
		}
		if _, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: annotations}, Spec: spec}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	handedOver := map[string]string{profile.HandedOverAnnotation: "pool-scheduler"}
	// No admission path: the template names pool-scheduler.
	replicaSet("web", 3, nil)
	// Every pod comes back handed over (an admission path stuck handing pods over).
	replicaSet("stuck", 1, handedOver)
	// Kueue holds it.
	replicaSet("queued", 1, handedOver, "kueue.x-k8s.io/admission")
	const pods = 5

	var clockMu sync.Mutex
	clock := time.Now()
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	recorder := record.NewFakeRecorder(10000)
	const interval = 15 * time.Second
	c, err := handoff.New(cs, cs.Discovery(), recorder, handoff.Options{
		Lease:         handoff.Lease{Lease: types.NamespacedName{Namespace: "pool-scheduler", Name: "pool-scheduler"}, Duration: 15 * time.Second},
		SchedulerName: "pool-scheduler", Handback: true, HandbackAfter: 2 * time.Minute, HandbackQPS: 100, Interval: interval,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Start(tCtx) {
		t.Fatal("the hand-off controller did not start")
	}
	// Before each sync: every replica exists (the ReplicaSet controller recreated what was
	// deleted) and the controller's cache holds exactly the pods the API does.
	caught := func() {
		t.Helper()
		if err := wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			api := sets.New[types.UID]()
			for _, p := range list.Items {
				api.Insert(p.UID)
			}
			cached := sets.New[types.UID]()
			for _, obj := range c.Pods().List() {
				if p := obj.(*v1.Pod); p.Namespace == ns {
					cached.Insert(p.UID)
				}
			}
			return api.Len() == pods && api.Equal(cached), nil
		}); err != nil {
			t.Fatalf("the replicas or the controller's cache never caught up: %v", err)
		}
	}

	var above time.Duration // how long the gauge has been above the threshold
	fired := false
	for elapsed := time.Duration(0); elapsed <= threshold+forDuration+2*interval; elapsed += interval {
		caught()
		if err := c.Sync(tCtx); err != nil {
			t.Fatalf("sync at %s: %v", elapsed, err)
		}
		if oldest := gauge(t, "pool_scheduler_handoff_oldest_waiting_pod_seconds", nil); oldest > threshold.Seconds() {
			fired = fired || above >= forDuration
			above += interval
		} else {
			above = 0
		}
		clockMu.Lock()
		clock = clock.Add(interval)
		clockMu.Unlock()
	}
	caught()

	mu.Lock()
	got := maps.Clone(deleted)
	mu.Unlock()
	if diff := cmp.Diff(map[string]int{"stuck": 1}, got); diff != "" {
		t.Errorf("pods deleted per owner over %s of outage (-want +got):\n%s", threshold+forDuration, diff)
	}
	if !fired {
		t.Errorf("pool_scheduler_handoff_oldest_waiting_pod_seconds never stayed above %s for %s: PoolSchedulerPodsWaiting would not fire", threshold, forDuration)
	}
	// The gated pod is not counted: 3 of web and stuck's replacement.
	if got := gauge(t, "pool_scheduler_handoff_waiting_pods", map[string]string{"owner": handoff.OwnerRecreatable}); got != 4 {
		t.Errorf("waiting recreatable pods = %v, want 4 (not the gated one)", got)
	}
	if got := gauge(t, "pool_scheduler_handoff_stranded_reported_total", map[string]string{"reason": "replacement-waits"}); got < 1 {
		t.Errorf("stranded_reported_total{reason=replacement-waits} = %v, want >= 1", got)
	}
	if got := gauge(t, "pool_scheduler_handoff_stranded_reported_total", map[string]string{"reason": "not-handed-over"}); got < 3 {
		t.Errorf("stranded_reported_total{reason=not-handed-over} = %v, want >= 3 (web's pods)", got)
	}
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if n := countContaining(events, "HandedBack"); n != 1 {
		t.Errorf("%d HandedBack events, want 1: %q", n, events)
	}
	if n := countContaining(events, "this replacement waits for pool-scheduler again"); n != 1 {
		t.Errorf("%d StrandedPod events for stuck's replacement, want 1: %q", n, events)
	}
	if n := countContaining(events, "admission did not hand it over"); n != 3 {
		t.Errorf("%d StrandedPod events for web's pods, want 3 (once each): %q", n, events)
	}
	queued, err := cs.CoreV1().Pods(ns).List(tCtx, metav1.ListOptions{LabelSelector: "app=queued"})
	if err != nil || len(queued.Items) != 1 {
		t.Fatalf("queued's pods: %v, %v", queued, err)
	}
	if countContaining(events, queued.Items[0].Name) != 0 {
		t.Errorf("the gated pod %s got an event: %q", queued.Items[0].Name, events)
	}
}

// waitingAlert reads PoolSchedulerPodsWaiting's threshold (seconds) and `for` from the shipped
// rules, so this test follows them.
func waitingAlert(t *testing.T) (threshold, forDuration time.Duration) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(util.RepoRoot(), "manifests/monitoring/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
				For   string `json:"for"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert != "PoolSchedulerPodsWaiting" {
				continue
			}
			m := regexp.MustCompile(`^max\(pool_scheduler_handoff_oldest_waiting_pod_seconds\) > (\d+)$`).FindStringSubmatch(strings.TrimSpace(r.Expr))
			if m == nil {
				t.Fatalf("PoolSchedulerPodsWaiting's expr %q is not max(oldest waiting) > seconds: update this test", r.Expr)
			}
			s, _ := strconv.Atoi(m[1])
			d, err := time.ParseDuration(r.For)
			if err != nil {
				t.Fatalf("PoolSchedulerPodsWaiting's for: %v", err)
			}
			return time.Duration(s) * time.Second, d
		}
	}
	t.Fatal("no PoolSchedulerPodsWaiting in manifests/monitoring/alerts.yaml")
	return 0, 0
}

// gauge reads a metric's value (gauge or counter) from the controllers' registry, as scraped.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
			return false
		}
	}
	return true
}

func countContaining(list []string, sub string) int {
	n := 0
	for _, s := range list {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}
