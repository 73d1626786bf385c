package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/heartbeat"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestWedgedLeaderIsDown: health means scheduling, read from the leader's heartbeat. Against a
// real kube-apiserver, with the shipped MutatingAdmissionPolicy following the hand-off
// controller's switch, the upstream ReplicaSet controller in process, and a Lease renewed
// throughout by a leader stand-in that publishes the heartbeat a pool-scheduler leader does
// (pkg/heartbeat: its attempts, its queue, its informers' resource versions, from real
// informers); the webhook's judge (the Lease and the switch, handoff.Following) is asked beside
// it:
//
//  1. busy: while it binds a backlog of pods one at a time, slower than the progress bound lets
//     any single pod wait, the leader stays healthy (the switch never turns off, the webhook's
//     judge never stops handing over);
//  2. wedged: it stops binding but keeps renewing. Once pods have waited in its queue past the
//     progress bound with no attempt finished, the switch turns off and new pods go to the
//     default scheduler; the stranded ReplicaSet pods are handed back and their replacements,
//     too, keep the default scheduler (the verdict holds once its queue is empty);
//  3. a new leader takes the Lease: pods are handed over again.
func TestWedgedLeaderIsDown(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	// Everything this test starts stops before the control plane does (cleanups run last in,
	// first out), so nothing waits on a stopped apiserver or logs after the test.
	ctx, cancel := context.WithCancel(tCtx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	goRun := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	const ns = "pool-scheduler"
	const progressBound = 4 * time.Second

	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	objs := util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "admission", "policy"))
	for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "handoff")) {
		if o.GetKind() == "ConfigMap" {
			objs = append(objs, o)
		}
	}
	if err := util.CreateObjects(tCtx, cp, objs); err != nil {
		t.Fatal(err)
	}
	app, _ := createOptedInNamespaces(tCtx, t, cs)
	util.CreateNode(tCtx, t, cs, util.Node("user-0", map[string]string{"kubernetes.azure.com/agentpool": "user"}).Obj())

	// The ReplicaSet controller, as kube-controller-manager runs it.
	factory := informers.NewSharedInformerFactory(cs, 0)
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), cs, 100)
	factory.Start(ctx.Done())
	goRun(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	goRun(func() { rsc.Run(ctx, 2) })

	// The leader stand-in renews the Lease every 500ms for as long as the test runs.
	loop := newStandInLoop(cs, util.SchedulerName)
	goRun(func() { loop.run(ctx) })
	leader := &leaseRenewer{cs: cs, namespace: ns, name: "pool-scheduler", holder: "leader-1", sample: loop.sample}
	goRun(func() { leader.run(ctx, t) })

	// The hand-off controller with short bounds.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(broadcaster.Shutdown)
	c, err := handoff.New(cs, cs.Discovery(), broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "pool-scheduler-handoff"}), handoff.Options{
		Lease:         handoff.Lease{Lease: types.NamespacedName{Namespace: ns, Name: "pool-scheduler"}, Duration: 5 * time.Second},
		SchedulerName: util.SchedulerName,
		Switch:        types.NamespacedName{Namespace: ns, Name: handoff.SwitchConfigMap},
		Handback:      true,
		HandbackAfter: 5 * time.Second,
		HandbackQPS:   50,
		Interval:      200 * time.Millisecond,
		ProgressBound: progressBound,
	}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	goRun(func() { _ = c.Run(ctx) })

	// The webhook's judge, as webhook.SetupWithManager builds it, asked every 100ms: its
	// verdicts in order.
	lw, err := handoff.NewLeaseWatch(cs, handoff.Lease{Lease: types.NamespacedName{Namespace: ns, Name: "pool-scheduler"}, Duration: 5 * time.Second}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	sw := handoff.NewSwitchWatch(cs, types.NamespacedName{Namespace: ns, Name: handoff.SwitchConfigMap})
	goRun(func() { lw.Run(ctx) })
	goRun(func() { _ = sw.Run(ctx) })
	webhookJudge := &handoff.Judge{Leader: handoff.Following(lw, sw, nil)}
	verdicts := &switchLog{}
	goRun(func() {
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			ok, _ := webhookJudge.Evaluate(ctx)
			verdicts.add(fmt.Sprint(ok))
		}, 100*time.Millisecond)
	})

	// Every value the switch takes, in order.
	switches := &switchLog{}
	goRun(func() { switches.watch(ctx, t, cs, ns) })
	waitForHandOver(tCtx, t, cs, app, util.SchedulerName)
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return verdicts.last() == "true", nil
	}); err != nil {
		t.Fatalf("the webhook's judge never handed over: %v", err)
	}

	createRS := func(name string, replicas int32) *appsv1.ReplicaSet {
		t.Helper()
		labels := map[string]string{"app": name, "pod-template-hash": name + "-h"}
		rs, err := cs.AppsV1().ReplicaSets(app).Create(tCtx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: app},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	podsOf := func(name string) []v1.Pod {
		t.Helper()
		pods, err := cs.CoreV1().Pods(app).List(tCtx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}

	// 1. Busy: a backlog of 12 pods bound one per progressBound/4: the last waits three bounds.
	busyFrom, busyVerdicts := switches.len(), verdicts.len()
	createRS("backlog", 12)
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(podsOf("backlog")) == 12, nil
	}); err != nil {
		t.Fatalf("the ReplicaSet did not create its pods: %v", err)
	}
	for _, p := range podsOf("backlog") {
		if p.Spec.SchedulerName != util.SchedulerName {
			t.Fatalf("backlog pod %s: schedulerName %s, want it handed over", p.Name, p.Spec.SchedulerName)
		}
	}
	bindOneAtATime(tCtx, t, cs, app, "app=backlog", "user-0", progressBound/4, func() { loop.attempts.Add(1) })
	if got := switches.since(busyFrom); sets.New(got...).Has("false") {
		t.Fatalf("the switch turned off while the leader was binding its backlog: %v", got)
	}
	if got := verdicts.since(busyVerdicts); sets.New(got...).Has("false") {
		t.Fatalf("the webhook's judge stopped handing over while the leader was binding its backlog")
	}

	// 2. Wedged: the Lease is still renewed, nothing is bound.
	stranded := createRS("stranded", 3)
	var strandedUIDs sets.Set[types.UID]
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		strandedUIDs = sets.New[types.UID]()
		for _, p := range podsOf("stranded") {
			if p.Spec.SchedulerName == util.SchedulerName {
				strandedUIDs.Insert(p.UID)
			}
		}
		return strandedUIDs.Len() == 3, nil
	}); err != nil {
		t.Fatalf("%d pods of the ReplicaSet were handed over before the wedge showed, want 3: %v", strandedUIDs.Len(), err)
	}
	wedgedFrom := switches.len()
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return switches.last() == "false", nil
	}); err != nil {
		t.Fatalf("the switch stayed on while the leader renewed its Lease and bound nothing: %v", switches.since(0))
	}
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return verdicts.last() == "false", nil
	}); err != nil {
		t.Fatalf("the webhook's judge kept handing over while the leader renewed its Lease and bound nothing")
	}
	wedgedVerdicts := verdicts.len()
	// New pods keep the default scheduler.
	createRS("during", 2)
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(podsOf("during")) == 2, nil
	}); err != nil {
		t.Fatalf("the ReplicaSet did not create its pods: %v", err)
	}
	for _, p := range podsOf("during") {
		if p.Spec.SchedulerName != admission.DefaultSchedulerName {
			t.Errorf("pod %s created during the wedge: schedulerName %s, want %s", p.Name, p.Spec.SchedulerName, admission.DefaultSchedulerName)
		}
	}
	// The stranded pods are handed back; their replacements keep the default scheduler.
	if err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		pods := podsOf("stranded")
		if len(pods) != 3 {
			return false, nil
		}
		for _, p := range pods {
			if strandedUIDs.Has(p.UID) || p.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the stranded pods were not handed back: %v", err)
	}
	for _, p := range podsOf("stranded") {
		if p.Spec.SchedulerName != admission.DefaultSchedulerName {
			t.Errorf("replacement %s: schedulerName %s, want %s", p.Name, p.Spec.SchedulerName, admission.DefaultSchedulerName)
		}
	}
	if err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cs.CoreV1().Events(app).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", stranded.Name).String()})
		return err == nil && hasReason(events.Items, "HandedBack"), nil
	}); err != nil {
		t.Errorf("no HandedBack event on the ReplicaSet %s: %v", stranded.Name, err)
	}
	if got := switches.since(wedgedFrom); sets.New(got...).Has("true") {
		t.Errorf("the switch turned on again during the wedge: %v", got)
	}
	if got := verdicts.since(wedgedVerdicts); sets.New(got...).Has("true") {
		t.Errorf("the webhook's judge handed over again during the wedge")
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(tCtx, handoff.SwitchConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switch reason: %s", cm.Data[handoff.SwitchReasonKey])

	// 3. A new leader: a fresh chance, pods are handed over again.
	leader.setHolder("leader-2")
	waitForHandOver(tCtx, t, cs, app, util.SchedulerName)
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return verdicts.last() == "true", nil
	}); err != nil {
		t.Errorf("the webhook's judge did not hand over to the new leader")
	}
}

// waitForHandOver creates probe pods in ns until one comes out of admission with schedulerName;
// probes are deleted at once, so none waits for a scheduler.
func waitForHandOver(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, schedulerName string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, st.MakePod().GenerateName("probe-").Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			return false, err
		}
		return p.Spec.SchedulerName == schedulerName, nil
	})
	if err != nil {
		t.Fatalf("no probe pod in %s got schedulerName %s: %v", ns, schedulerName, err)
	}
}

// leaseRenewer holds a Lease and renews it every 500ms: a leader that may schedule nothing.
// With sample, each renewal publishes the heartbeat as pool-scheduler's leader does.
type leaseRenewer struct {
	cs              kubernetes.Interface
	namespace, name string
	sample          func() heartbeat.Sample

	mu     sync.Mutex
	holder string
}

func (l *leaseRenewer) setHolder(h string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holder = h
}

func (l *leaseRenewer) run(ctx context.Context, t *testing.T) {
	leases := l.cs.CoordinationV1().Leases(l.namespace)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		l.mu.Lock()
		holder := l.holder
		l.mu.Unlock()
		now := metav1.NowMicro()
		var labels map[string]string
		if l.sample != nil {
			labels = l.sample().Labels(holder)
		}
		lease, err := leases.Get(ctx, l.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: l.name, Labels: labels},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](5),
					AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
		case err == nil:
			lease.Spec.HolderIdentity, lease.Spec.RenewTime = &holder, &now
			if labels != nil {
				lease.Labels = labels
			}
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			t.Logf("renewing the Lease: %v", err)
		}
	}, 500*time.Millisecond)
}

// bindOneAtATime binds the pods matching selector to node, oldest first, one per period, until
// none is left unbound: a scheduler with a backlog that binds.
func bindOneAtATime(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector, node string, period time.Duration, attempted func()) {
	t.Helper()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName="})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			return
		}
		sort.Slice(pods.Items, func(i, j int) bool {
			return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp)
		})
		p := pods.Items[0]
		err = cs.CoreV1().Pods(ns).Bind(ctx, &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, UID: p.UID},
			Target:     v1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("binding %s: %v", p.Name, err)
		}
		attempted()
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(period):
		}
	}
}

// switchLog records every value a verdict takes: the switch ConfigMap's, a judge's.
type switchLog struct {
	mu     sync.Mutex
	values []string
}

func (s *switchLog) watch(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", handoff.SwitchConfigMap).String()})
	if err != nil {
		t.Errorf("watching the switch: %v", err)
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if cm, ok := ev.Object.(*v1.ConfigMap); ok {
			s.add(cm.Data[handoff.SwitchKey])
		}
	}
}

func (s *switchLog) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, v)
}

func (s *switchLog) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values)
}

func (s *switchLog) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.values) == 0 {
		return ""
	}
	return s.values[len(s.values)-1]
}

// since returns the values from the i-th on.
func (s *switchLog) since(i int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.values[i:]...)
}

func hasReason(events []v1.Event, reason string) bool {
	for _, e := range events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// standInLoop is the stand-in leader's scheduling loop as its heartbeat shows it: attempts it
// counts itself, its queue (the pods that name the scheduler, wait unbound and are not gated)
// and its informers' resource versions, from real informers of every pod and node.
type standInLoop struct {
	schedulerName string
	attempts      atomic.Uint64
	pods, nodes   cache.SharedIndexInformer
}

func newStandInLoop(cs kubernetes.Interface, schedulerName string) *standInLoop {
	f := informers.NewSharedInformerFactory(cs, 0)
	return &standInLoop{schedulerName: schedulerName, pods: f.Core().V1().Pods().Informer(), nodes: f.Core().V1().Nodes().Informer()}
}

func (l *standInLoop) run(ctx context.Context) {
	go l.nodes.Run(ctx.Done())
	l.pods.Run(ctx.Done())
}

func (l *standInLoop) sample() heartbeat.Sample {
	s := heartbeat.Sample{Attempts: l.attempts.Load()}
	for _, obj := range l.pods.GetStore().List() {
		p := obj.(*v1.Pod)
		if p.Spec.SchedulerName == l.schedulerName && p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) == 0 && p.DeletionTimestamp == nil {
			s.Waiting++
		}
	}
	s.PodsRevision, _ = heartbeat.Revision(l.pods.LastSyncResourceVersion())
	s.NodesRevision, _ = heartbeat.Revision(l.nodes.LastSyncResourceVersion())
	return s
}
