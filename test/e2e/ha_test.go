package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// bindingLog records, from a watch on the pods of a namespace, when each pod was first seen
// bound and to which node, and any pod whose nodeName changed after it was set.
type bindingLog struct {
	mu      sync.Mutex
	at      map[string]time.Time
	node    map[string]string
	changed []string
}

func watchBindings(ctx context.Context, t *testing.T, cs kubernetes.Interface, namespace string) *bindingLog {
	t.Helper()
	b := &bindingLog{at: map[string]time.Time{}, node: map[string]string{}}
	// An informer, not a bare watch: under load the apiserver closes watchers that fall behind
	// ("unresponsive"), and an informer lists and watches again.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	record := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		b.mu.Lock()
		defer b.mu.Unlock()
		if prev, seen := b.node[p.Name]; !seen {
			b.node[p.Name], b.at[p.Name] = p.Spec.NodeName, now
		} else if prev != p.Spec.NodeName {
			b.changed = append(b.changed, fmt.Sprintf("%s: %s -> %s", p.Name, prev, p.Spec.NodeName))
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	startInformers(ctx, t, factory)
	return b
}

// startInformers starts the factory's informers until the test ends and waits for their caches.
func startInformers(ctx context.Context, t *testing.T, factory informers.SharedInformerFactory) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
}

func (b *bindingLog) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.at)
}

// firstAfter returns the earliest binding seen after t.
func (b *bindingLog) firstAfter(t time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first time.Time
	for _, at := range b.at {
		if at.After(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// TestSchedulerHA runs three bin/pool-scheduler replicas with the shipped config as shipped
// (leader election on the Lease pool-scheduler/pool-scheduler with the shipped timings, the
// kube-scheduler defaults 15s/10s/2s: a takeover after SIGKILL, which does not release the
// Lease, takes ~15 s) while pods are created at a steady pace until the kills are done,
// SIGKILLs the leader three times (a replacement replica starts after each kill, as a
// Deployment would) and checks:
//   - a standby takes the Lease over each time and binds pods (takeover times are logged);
//   - no pod is lost: all end bound, each to a ready node of the pool;
//   - no pod is bound twice. The apiserver refuses a second binding of a bound pod ("already
//     assigned", 409) and nodeName is immutable, so a double binding cannot be stored; what two
//     schedulers acting at once (split brain) would produce is that refusal. The test asserts it
//     never happened: no scheduler logged it, no FailedScheduling event reports it, no pod has
//     more than one Scheduled event, and the pod watch never saw a pod's nodeName change.
func TestSchedulerHA(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"example.com/tier": "gold"}
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "spot", want))
	ready := map[string]bool{}
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("spot-%d", i)
		util.CreateNode(tCtx, t, cs, util.Node(name, map[string]string{poolKey: "spot", "example.com/tier": "gold"}).Obj())
		ready[name] = true
	}
	// In the pool but without its labels: NodePoolReady must keep every pod off them.
	for i := 0; i < 2; i++ {
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("spot-unlabelled-%d", i), map[string]string{poolKey: "spot"}).Obj())
	}
	ns := util.CreateNamespace(tCtx, t, cs, "ha")
	bindings := watchBindings(tCtx, t, cs, ns)

	doc := util.ShippedConfigFor(t, cp)
	le := util.LoadShippedConfig(t).LeaderElection
	timings := fmt.Sprintf("%v/%v/%v", le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration)
	const leaseNS, leaseName = "pool-scheduler", "pool-scheduler"
	// Waits scale with the lease: a takeover takes up to a lease duration plus a retry period,
	// more on a loaded machine.
	leaseWait := 4*le.LeaseDuration.Duration + 30*time.Second
	replicas := &util.Replicas{
		Client: cs, LeaseNamespace: leaseNS, LeaseName: leaseName,
		Start:          func() *util.SchedulerProcess { return util.StartSchedulerBinary(t, doc) },
		FirstWorkAfter: bindings.firstAfter,
		LeaseTimeout:   leaseWait,
	}
	replicas.StartReplicas(tCtx, t, 3)

	// Create pods at a steady pace (~40/s) until the kills are done, so that every leader has
	// pods to bind, however long the takeovers take.
	createCtx, stopCreating := context.WithCancel(tCtx)
	defer stopCreating()
	created := make(chan error, 1)
	var pods int
	go func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-createCtx.Done():
				created <- nil
				return
			case <-tick.C:
			}
			// Each create runs to its end (tCtx, not createCtx): a create cancelled in flight
			// may still land after the List below, which would then miscount the pods.
			p := util.Pod(ns, fmt.Sprintf("p-%05d", i)).Obj()
			if _, err := cs.CoreV1().Pods(ns).Create(tCtx, p, metav1.CreateOptions{}); err != nil {
				created <- fmt.Errorf("creating pod %s: %w", p.Name, err)
				return
			}
		}
	}()

	var takeovers []string
	for k := 1; k <= 3; k++ {
		// The current leader is the live replica that logged acquiring the Lease; it must be
		// binding pods before it is killed.
		base := bindings.count()
		leader, err := replicas.Leader(tCtx, leaseWait, func() bool { return bindings.count() >= base+20 })
		if err != nil {
			t.Fatalf("kill %d: no live leader binding pods (bound so far %d): %v", k, bindings.count(), err)
		}
		if h := util.LeaseHolder(tCtx, cs, leaseNS, leaseName); h != replicas.Holder {
			t.Fatalf("kill %d: Lease holder %q, want the leader seen so far %q", k, h, replicas.Holder)
		}
		boundAtKill := bindings.count()
		took, err := replicas.KillLeader(tCtx, t, leader, leaseWait)
		if err != nil {
			t.Fatalf("kill %d: no pod bound: %v", k, err)
		}
		msg := fmt.Sprintf("kill %d: new holder %s after %v, first new binding after %v (%d pods bound before the kill)",
			k, took.Holder, took.Lease.Round(time.Millisecond), took.FirstWork.Round(time.Millisecond), boundAtKill)
		t.Log(msg)
		takeovers = append(takeovers, msg)
	}

	// The last leader binds pods for a while, then creation stops.
	base := bindings.count()
	if _, err := replicas.Leader(tCtx, leaseWait, func() bool { return bindings.count() >= base+20 }); err != nil {
		t.Fatalf("the last leader is not binding pods: %v", err)
	}
	stopCreating()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	// Every create has returned: count what exists.
	all, err := cs.CoreV1().Pods(ns).List(tCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods = len(all.Items)
	t.Logf("%d pods created; %d bound so far", pods, bindings.count())
	list := util.WaitAllBound(tCtx, t, cs, ns, pods, 2*time.Minute)

	for _, p := range list {
		if !ready[p.Spec.NodeName] {
			t.Errorf("pod %s bound to %s, not a ready node of the pool", p.Name, p.Spec.NodeName)
		}
	}
	bindings.mu.Lock()
	if len(bindings.changed) > 0 {
		t.Errorf("pods whose nodeName changed: %v", bindings.changed)
	}
	bindings.mu.Unlock()
	for i, p := range replicas.Procs {
		if strings.Contains(p.Output(), "already assigned") {
			t.Errorf("replica %d tried to bind a pod that was already bound:\n%s", i, grepLines(p.Output(), "already assigned", 5))
		}
	}
	checkSchedulingEvents(tCtx, t, cs, ns)
	for i, p := range replicas.Procs {
		if slices.Contains(replicas.Killed, p) {
			continue
		}
		if p.Exited() {
			t.Errorf("replica %d exited without being killed: %v", i, p.Output())
		}
	}
	lease, err := cs.CoordinationV1().Leases(leaseNS).Get(tCtx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.LeaseTransitions == nil || *lease.Spec.LeaseTransitions < 3 {
		t.Errorf("Lease transitions %v, want >= 3", lease.Spec.LeaseTransitions)
	}
	t.Logf("takeovers (shipped lease timings %s):\n  %s", timings, strings.Join(takeovers, "\n  "))
}

// checkSchedulingEvents fails the test if a pod has more than one Scheduled event or a binding
// was refused because the pod was already bound. (Fewer Scheduled events than pods is fine:
// a killed leader may not have flushed its last events.)
func checkSchedulingEvents(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	events, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := map[string]int{}
	for _, e := range events.Items {
		switch {
		case e.Reason == "Scheduled":
			scheduled[e.Regarding.Name]++
		case strings.Contains(e.Note, "already assigned"):
			t.Errorf("event %s %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	}
	for pod, n := range scheduled {
		if n > 1 {
			t.Errorf("pod %s has %d Scheduled events", pod, n)
		}
	}
	t.Logf("%d pods have a Scheduled event, none more than one", len(scheduled))
}

func grepLines(s, sub string, max int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
			if len(out) == max {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
