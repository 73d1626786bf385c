package handoff

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestControllerHandsBackStrandedPods: the controller follows the leader's Lease into the
// switch, and only after pool-scheduler has had no healthy leader for HandbackAfter does it
// delete the pods that waited that long and whose controller recreates them (an event on the
// controller); bare and Jobs' pods are reported once with an event on the pod; bound pods,
// pods of other schedulers and pods that have not waited long enough are never touched.
func TestControllerHandsBackStrandedPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	const ns = "pool-scheduler"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("scheduler-0"), RenewTime: &metav1.MicroTime{Time: clock}}}
	sw := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SwitchConfigMap}, Data: map[string]string{SwitchKey: "false"}}
	owned := func(p *st.PodWrapper, group, kind string) *st.PodWrapper {
		return p.OwnerReference(strings.ToLower(kind)+"-x", schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind})
	}
	pending := func(name string, created time.Time) *st.PodWrapper {
		p := st.MakePod().Namespace("app").Name(name).UID(name).SchedulerName("pool-scheduler").Phase(v1.PodPending).
			Annotation(profile.HandedOverAnnotation, "pool-scheduler")
		p.Pod.CreationTimestamp = metav1.Time{Time: created}
		return p
	}
	old := clock.Add(-10 * time.Minute)
	objs := []*v1.Pod{
		owned(pending("rs-old", old), "apps", "ReplicaSet").Obj(),
		owned(pending("sts-old", old), "apps", "StatefulSet").Obj(),
		pending("bare-old", old).Obj(),
		owned(pending("job-old", old), "batch", "Job").Obj(),
		owned(pending("bound", old), "apps", "ReplicaSet").Node("n1").Phase(v1.PodRunning).Obj(),
		owned(pending("other-scheduler", old), "apps", "ReplicaSet").SchedulerName("default-scheduler").Obj(),
		// Its template names pool-scheduler (no admission handed it over): recreated, it would
		// wait again, so it is reported, never deleted.
		func() *v1.Pod {
			p := owned(pending("rs-template", old), "apps", "ReplicaSet").Obj()
			p.Annotations = nil
			return p
		}(),
		// Gated (Kueue holds it): not waiting for the scheduler, neither counted nor handed back.
		owned(pending("rs-gated", old), "apps", "ReplicaSet").SchedulingGates([]string{"kueue.x-k8s.io/admission"}).Obj(),
	}
	cs := fake.NewClientset(lease, sw)
	for _, p := range objs {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	major, minor, _ := strings.Cut(version.KubernetesLine(), ".")
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &k8sversion.Info{Major: major, Minor: minor}}
	recorder := record.NewFakeRecorder(100)
	after := 2 * time.Minute
	c, err := New(cs, dc, recorder, Options{
		Lease:         Lease{Lease: types.NamespacedName{Namespace: ns, Name: "pool-scheduler"}, Duration: 15 * time.Second},
		SchedulerName: "pool-scheduler", Switch: types.NamespacedName{Namespace: ns, Name: SwitchConfigMap},
		Handback: true, HandbackAfter: after, HandbackQPS: 100, Interval: time.Second,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	go c.lease.Run(ctx)
	go c.pods.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), c.lease.HasSynced, c.pods.HasSynced) {
		t.Fatal("caches not synced")
	}
	// The leader renews once the controller runs (a Lease found at start does not count).
	renewedLease := lease.DeepCopy()
	renewedLease.Spec.RenewTime = &metav1.MicroTime{Time: clock.Add(time.Second)}
	if _, err := cs.CoordinationV1().Leases(ns).Update(ctx, renewedLease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informers deliver asynchronously: wait until the controller has seen the renewal
	// itself. Healthy alone is true from the initial list already (a Lease renewed within a
	// lease duration counts), and a renewal delivered after the clock moves below would count
	// from then, keeping the leader healthy 20 s on.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		c.lease.mu.Lock()
		seen := c.lease.rec.renew != nil && c.lease.rec.renew.Equal(renewedLease.Spec.RenewTime)
		c.lease.mu.Unlock()
		ok, _ := c.lease.Healthy(ctx)
		return ok && seen, nil
	}); err != nil {
		t.Fatal("the Lease's renewal was never seen")
	}
	sync := func(t *testing.T) {
		t.Helper()
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	switchValue := func(t *testing.T) (string, string) {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, SwitchConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data[SwitchKey], cm.Data[SwitchReasonKey]
	}
	remaining := func(t *testing.T) []string {
		t.Helper()
		pods, err := cs.CoreV1().Pods("app").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return sets.List(sets.New(names...))
	}
	events := func() []string {
		var out []string
		for {
			select {
			case e := <-recorder.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	all := []string{"bare-old", "bound", "job-old", "other-scheduler", "rs-gated", "rs-old", "rs-template", "sts-old"}

	sync(t)
	if v, _ := switchValue(t); v != "true" {
		t.Errorf("healthy leader: switch %q, want true", v)
	}
	if got := testutil.ToFloat64(waitingPods.WithLabelValues(OwnerRecreatable)); got != 3 {
		t.Errorf("waiting recreatable pods = %v, want 3 (rs-old, sts-old, rs-template; not the gated one)", got)
	}
	if got := testutil.ToFloat64(oldestWaiting.WithLabelValues()); got != (10 * time.Minute).Seconds() {
		t.Errorf("oldest waiting = %v s, want 600", got)
	}

	// The leader stops renewing: degraded, but not for long enough to hand anything back.
	advance(20 * time.Second)
	sync(t)
	if v, why := switchValue(t); v != "false" || !strings.Contains(why, "has not renewed") {
		t.Errorf("leader gone: switch %q (%q), want false with the reason", v, why)
	}
	if diff := cmp.Diff(all, remaining(t)); diff != "" {
		t.Errorf("degraded for less than %s: pods changed (-want +got):\n%s", after, diff)
	}
	if e := events(); len(e) != 1 || !strings.HasPrefix(e[0], "Warning HandoffStopped New pods keep the default scheduler: the leader scheduler-0 has not renewed") {
		t.Errorf("events before the bound: %q, want only HandoffStopped", e)
	}

	// A pod created during the outage has not waited long enough yet.
	young, err := cs.CoreV1().Pods("app").Create(ctx, owned(pending("rs-young", clock.Add(after-time.Second)), "apps", "ReplicaSet").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	advance(after)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok, _ := c.pods.GetStore().Get(young)
		return ok, nil
	}); err != nil {
		t.Fatal("the young pod never reached the cache")
	}
	sync(t)
	if diff := cmp.Diff([]string{"bare-old", "bound", "job-old", "other-scheduler", "rs-gated", "rs-template", "rs-young"}, remaining(t)); diff != "" {
		t.Errorf("stranded: pods left (-want +got):\n%s", diff)
	}
	got := events()
	want := []string{
		"Warning HandedBack Deleted pending pod rs-old",
		"Warning HandedBack Deleted pending pod sts-old",
		"Warning StrandedPod Waited 12m20s for pool-scheduler, which has no healthy leader",
	}
	for _, w := range want {
		if !containsPrefix(got, w) {
			t.Errorf("no event starting %q in %q", w, got)
		}
	}
	if n := countPrefix(got, "Warning StrandedPod"); n != 3 {
		t.Errorf("%d StrandedPod events, want 3 (the bare pod, the Job's, the one admission did not hand over): %q", n, got)
	}
	if !containsSubstring(got, "admission did not hand it over") {
		t.Errorf("no StrandedPod event saying the unmarked pod was not handed over: %q", got)
	}
	if got := testutil.ToFloat64(handedBack.WithLabelValues("ReplicaSet")); got != 1 {
		t.Errorf("handed back ReplicaSet pods = %v, want 1", got)
	}

	// Reported once, not at every sync.
	sync(t)
	if e := events(); countPrefix(e, "Warning StrandedPod") != 0 {
		t.Errorf("stranded pods reported again: %q", e)
	}
}

// TestControllerHandbackOff: with --handback=false nothing is deleted, however long the outage.
func TestControllerHandbackOff(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	p := st.MakePod().Namespace("app").Name("rs").SchedulerName("pool-scheduler").Phase(v1.PodPending).
		Annotation(profile.HandedOverAnnotation, "pool-scheduler").
		OwnerReference("rs", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
	p.CreationTimestamp = metav1.Time{Time: clock.Add(-time.Hour)}
	cs := fake.NewClientset(p)
	c, err := New(cs, &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, record.NewFakeRecorder(10), Options{
		Lease:         Lease{Lease: types.NamespacedName{Namespace: "ns", Name: "none"}, Duration: 15 * time.Second},
		SchedulerName: "pool-scheduler", HandbackAfter: time.Minute, HandbackQPS: 1, Interval: time.Second,
	}, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	c.Judge.Leader = func(context.Context) (bool, string) { return false, "down" }
	if err := c.pods.GetStore().Add(p); err != nil {
		t.Fatal(err)
	}
	// The first sync starts the outage's clock; an hour later the pod would be stranded.
	for range 2 {
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Hour)
	}
	if _, err := cs.CoreV1().Pods("app").Get(ctx, "rs", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod is gone with hand-back off: %v", err)
	}
	// The same with hand-back on: the pod is handed back (so the check above means something).
	c.o.Handback = true
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("app").Get(ctx, "rs", metav1.GetOptions{}); err == nil {
		t.Error("with hand-back on, the stranded pod is still there")
	}
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func containsPrefix(list []string, prefix string) bool { return countPrefix(list, prefix) > 0 }

func countPrefix(list []string, prefix string) int {
	n := 0
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// TestControllerStopsOnVersionSkew: a kube-apiserver outside the line's version skew stops the
// hand-off however healthy the leader: the switch turns off, pool_scheduler_apiserver_supported
// is 0, and a HandoffStopped event on the switch names the line to run; the pods already handed
// to the running leader are not handed back.
func TestControllerStopsOnVersionSkew(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	const ns = "pool-scheduler"
	sw := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SwitchConfigMap}, Data: map[string]string{SwitchKey: "true"}}
	// A pod waiting for pool-scheduler, long enough to be handed back were it stranded.
	waiting := st.MakePod().Namespace("app").Name("rs").SchedulerName("pool-scheduler").Phase(v1.PodPending).
		OwnerReference("rs", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
	waiting.CreationTimestamp = metav1.Time{Time: clock.Add(-time.Hour)}
	cs := fake.NewClientset(sw, waiting)
	major, minor, _ := strings.Cut(version.KubernetesLine(), ".")
	var m int
	if _, err := fmt.Sscan(minor, &m); err != nil {
		t.Fatal(err)
	}
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &k8sversion.Info{Major: major, Minor: fmt.Sprint(m + 2)}}
	recorder := record.NewFakeRecorder(10)
	c, err := New(cs, dc, recorder, Options{
		Lease:         Lease{Lease: types.NamespacedName{Namespace: ns, Name: "pool-scheduler"}, Duration: 15 * time.Second},
		SchedulerName: "pool-scheduler", Switch: types.NamespacedName{Namespace: ns, Name: SwitchConfigMap},
		Handback: true, HandbackAfter: time.Minute, HandbackQPS: 1, Interval: time.Second,
	}, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	c.Judge.Leader = func(context.Context) (bool, string) { return true, "" }
	if err := c.pods.GetStore().Add(waiting); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Hour)
	}
	// The running leader still schedules what was handed to it: nothing is handed back.
	if _, err := cs.CoreV1().Pods("app").Get(ctx, "rs", metav1.GetOptions{}); err != nil {
		t.Errorf("a pod waiting for a running pool-scheduler was handed back on a version skew: %v", err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, SwitchConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[SwitchKey] != "false" || !strings.Contains(cm.Data[SwitchReasonKey], "outside this line's") {
		t.Errorf("switch %q (%q), want false for the version skew", cm.Data[SwitchKey], cm.Data[SwitchReasonKey])
	}
	if got := testutil.ToFloat64(version.APIServerSupported.WithLabelValues()); got != 0 {
		t.Errorf("pool_scheduler_apiserver_supported = %v, want 0", got)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning HandoffStopped") || !strings.Contains(e, "run the release line of") {
			t.Errorf("event %q, want HandoffStopped naming the line to run", e)
		}
	default:
		t.Error("no event")
	}
}

// TestControllerHandsBackOncePerOwner: in one outage the pods an owner had when its first pod
// was handed back are handed back, each once; a replacement that waits for pool-scheduler again
// (admission still handing pods over) is reported once (StrandedPod, replacement-waits), never
// deleted. Once a leader has been healthy for HandbackAfter the outage is over, and in the next
// one that pod is handed back.
func TestControllerHandsBackOncePerOwner(t *testing.T) {
	after := 2 * time.Minute
	f := newOwnerFixture(t, time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), after)
	add, sync, exists, recorder := f.add, f.sync, f.exists, f.recorder
	add("web-1")
	add("web-2")
	sync() // the outage starts
	f.clock = f.clock.Add(after)
	sync()
	if exists("web-1") || exists("web-2") {
		t.Fatalf("the owner's two stranded pods: web-1 %v, web-2 %v; want both handed back", exists("web-1"), exists("web-2"))
	}
	before := testutil.ToFloat64(strandedReported.WithLabelValues("replacement-waits"))
	add("web-3") // the replacement, handed over again
	f.clock = f.clock.Add(time.Hour)
	sync()
	sync()
	if !exists("web-3") {
		t.Fatal("the replacement was deleted: the hand-back loops")
	}
	if got := testutil.ToFloat64(strandedReported.WithLabelValues("replacement-waits")) - before; got != 1 {
		t.Errorf("stranded_reported_total{reason=replacement-waits} rose by %v, want 1 (once per pod)", got)
	}
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	if countPrefix(events, "Warning HandedBack") != 2 || !containsSubstring(events, "this replacement waits for pool-scheduler again") {
		t.Errorf("events %q: want 2 HandedBack and one StrandedPod for the replacement", events)
	}
	// The leader returns for HandbackAfter: the outage is over. In the next one, web-3 goes.
	f.leader = true
	sync()
	f.clock = f.clock.Add(after)
	sync()
	f.leader = false
	sync()
	f.clock = f.clock.Add(after)
	sync()
	if exists("web-3") {
		t.Error("a new outage: web-3 was not handed back (the owner was never forgotten)")
	}
}

// TestControllerOwnerMemoryPerOutage: the owner memory is scoped to an outage. A pod handed over
// while the leader was judged healthy again, however briefly (a leader back for one sync, a
// watch that caught up), and stranded when it fails again, is handed back like any other; a
// replacement that waits again within one outage is still only reported.
func TestControllerOwnerMemoryPerOutage(t *testing.T) {
	after := 2 * time.Minute
	f := newOwnerFixture(t, time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC), after)
	add, sync, exists := f.add, f.sync, f.exists
	// Outage 1: web-1 is handed back; web-2, a replacement that waits again, is only reported.
	add("web-1")
	sync()
	f.clock = f.clock.Add(after)
	sync()
	add("web-2")
	f.clock = f.clock.Add(time.Minute)
	sync()
	if exists("web-1") || !exists("web-2") {
		t.Fatalf("outage 1: web-1 exists %v (want handed back), web-2 exists %v (want reported only)", exists("web-1"), exists("web-2"))
	}
	// The leader judged healthy for one sync (far less than HandbackAfter): web-3 is handed
	// over then; the leader fails again and web-3 strands.
	f.leader = true
	sync()
	add("web-3")
	f.leader = false
	f.clock = f.clock.Add(time.Second)
	sync()
	f.clock = f.clock.Add(after)
	sync()
	if exists("web-3") {
		t.Error("outage 2: web-3, handed over while the leader was healthy, was not handed back (the owner memory outlived the outage)")
	}
	// Within outage 2, a replacement that waits again is still held.
	add("web-4")
	f.clock = f.clock.Add(time.Minute)
	sync()
	if !exists("web-4") {
		t.Error("outage 2: web-4, a replacement that waits again in the same outage, was deleted: the hand-back loops")
	}
}

// ownerFixture is a controller with a fake clientset whose pod cache follows the API (as the
// informer does), a clock tests move, and a leader verdict tests set; pods belong to the
// ReplicaSet "web".
type ownerFixture struct {
	t        *testing.T
	ctx      context.Context
	cs       *fake.Clientset
	c        *Controller
	recorder *record.FakeRecorder
	clock    time.Time
	leader   bool
}

func newOwnerFixture(t *testing.T, clock time.Time, after time.Duration) *ownerFixture {
	f := &ownerFixture{t: t, ctx: context.Background(), cs: fake.NewClientset(), recorder: record.NewFakeRecorder(100), clock: clock}
	c, err := New(f.cs, &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, f.recorder, Options{
		Lease:         Lease{Lease: types.NamespacedName{Namespace: "ns", Name: "none"}, Duration: 15 * time.Second},
		SchedulerName: "pool-scheduler", Handback: true, HandbackAfter: after, HandbackQPS: 100, Interval: time.Second,
	}, func() time.Time { return f.clock })
	if err != nil {
		t.Fatal(err)
	}
	c.Judge.Leader = func(context.Context) (bool, string) { return f.leader, "down" }
	f.c = c
	return f
}

// pod is a pending pod of "web" that admission handed over an hour before the fixture's start.
func (f *ownerFixture) pod(name string) *v1.Pod {
	p := st.MakePod().Namespace("app").Name(name).UID(name).SchedulerName("pool-scheduler").Phase(v1.PodPending).
		Annotation(profile.HandedOverAnnotation, "pool-scheduler").
		OwnerReference("web", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
	p.OwnerReferences[0].UID = "web-uid"
	p.CreationTimestamp = metav1.Time{Time: f.clock.Add(-time.Hour)}
	return p
}

func (f *ownerFixture) add(name string) {
	f.t.Helper()
	p := f.pod(name)
	if _, err := f.cs.CoreV1().Pods(p.Namespace).Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.c.pods.GetStore().Add(p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *ownerFixture) sync() {
	f.t.Helper()
	if err := f.c.Sync(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	for _, obj := range f.c.pods.GetStore().List() {
		p := obj.(*v1.Pod)
		if _, err := f.cs.CoreV1().Pods(p.Namespace).Get(f.ctx, p.Name, metav1.GetOptions{}); err != nil {
			_ = f.c.pods.GetStore().Delete(p)
		}
	}
}

func (f *ownerFixture) exists(name string) bool {
	_, err := f.cs.CoreV1().Pods("app").Get(f.ctx, name, metav1.GetOptions{})
	return err == nil
}
