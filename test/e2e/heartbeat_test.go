package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestHealthFromTheSchedulingLoop: the hand-off controller judges pool-scheduler's leader by the
// heartbeat it publishes on its Lease, never by the pods handed to it. bin/pool-scheduler runs as
// shipped (leader-elected), reaching kube-apiserver through a proxy that can stall its watches;
// the webhook and the hand-off controller run as shipped (their Deployments' arguments, their
// ServiceAccounts under the shipped RBAC; the controller's --progress-bound and --handback-after
// shortened, the latter to the scheduler's lease duration), beside the cluster's default scheduler and the ReplicaSet controller:
//
//  1. a tenant's undecidable pod (a ResourceClaim never created: the scheduler holds it before
//     any attempt, and no verdict is ever written) among healthy traffic: the switch stays on
//     through quiet bounds, and later pods are still scheduled by pool-scheduler;
//  2. the leader's node watch stalls: a pod for a node it cannot see is judged Unschedulable
//     (its loop runs), but the node's change is not in its informer: degraded, the pod handed
//     back and placed by the default scheduler; the watch resumed, pods are handed over again;
//  3. a long wedge (its pod watch stalled for 16 bounds): the pods handed over before the
//     verdict are handed back, every pod created during it is given to the default scheduler
//     (no probe hands one to the wedged leader), and none is left pending.
func TestHealthFromTheSchedulingLoop(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	const ns = "pool-scheduler"
	const bound = 5 * time.Second

	installWebhook(tCtx, t, cp)
	var access []*unstructured.Unstructured
	var deployment, sw *unstructured.Unstructured
	for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "handoff")) {
		switch o.GetKind() {
		case "Deployment":
			deployment = o
		case "ConfigMap":
			sw = o
		default:
			access = append(access, o)
		}
	}
	util.ApplyAccessObjects(tCtx, t, cp, access)
	if err := util.CreateObjects(tCtx, cp, []*unstructured.Unstructured{sw}); err != nil {
		t.Fatal(err)
	}
	saCfg, kubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler-handoff", nil)
	waitAllowed(tCtx, t, clientFor(t, saCfg), "pool-scheduler-handoff", []authorizationv1.ResourceAttributes{
		{Verb: "watch", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "pool-scheduler"},
		{Verb: "watch", Resource: "nodes"},
		{Verb: "update", Resource: "configmaps", Namespace: ns, Name: handoff.SwitchConfigMap},
	})

	zones := []string{"zone-1", "zone-2", "zone-3"}
	for i := range 3 {
		util.CreateNode(tCtx, t, admin, util.Node(fmt.Sprintf("user-%d", i), map[string]string{
			"kubernetes.azure.com/agentpool": "user", v1.LabelTopologyZone: zones[i]}).Obj())
	}
	util.StartSchedulerBinary(t, util.UpstreamConfigFor(t, cp))
	factory := informers.NewSharedInformerFactory(admin, 0)
	rsc := replicaset.NewReplicaSetController(tCtx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), admin, 100)
	factory.Start(tCtx.Done())
	go rsc.Run(tCtx, 2)

	// pool-scheduler as shipped, through the proxy.
	proxy := util.StartStallProxy(t, cp)
	doc := util.ShippedConfigFor(t, cp)
	doc["clientConnection"].(map[string]any)["kubeconfig"] = proxy.Kubeconfig(t)
	util.StartSchedulerBinary(t, doc)

	args := containerArgs(deployment, map[string]string{"--config": util.ShippedConfigPath(), "--handback-after": "15s"})
	args = append(args, "--kubeconfig="+kubeconfig, "--switch-namespace="+ns, "--leader-elect-namespace="+ns,
		fmt.Sprintf("--progress-bound=%s", bound), "--sync-interval=500ms", "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	controller := util.StartProcess(t, util.LabelerBinary(t), args...)

	switches := watchSwitch(tCtx, t, cp, ns)
	opted, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "team-", Labels: map[string]string{profile.NamespaceLabel: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := opted.Name
	createRS := func(name string, replicas int32, nodeSelector map[string]string) {
		t.Helper()
		labels := map[string]string{"app": name, "pod-template-hash": name + "-h"}
		if _, err := admin.AppsV1().ReplicaSets(app).Create(tCtx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: app},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       v1.PodSpec{NodeSelector: nodeSelector, Containers: []v1.Container{{Name: "c", Image: "pause"}}},
				},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale := func(name string, replicas int32) {
		t.Helper()
		s, err := admin.AppsV1().ReplicaSets(app).GetScale(tCtx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = replicas
		if _, err := admin.AppsV1().ReplicaSets(app).UpdateScale(tCtx, name, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podsOf := func(name string) []v1.Pod {
		t.Helper()
		pods, err := admin.CoreV1().Pods(app).List(tCtx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	// placed waits until the ReplicaSet's n pods are bound, and checks who scheduled them.
	placed := func(name string, n int, schedulerName string) []v1.Pod {
		t.Helper()
		var pods []v1.Pod
		if err := wait.PollUntilContextTimeout(tCtx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			pods = podsOf(name)
			bound := 0
			for _, p := range pods {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					bound++
				}
			}
			return bound == n && len(pods) == n, nil
		}); err != nil {
			t.Fatalf("ReplicaSet %s: %d pods, not all %d bound: %v\nhand-off controller:\n%s", name, len(pods), n, err, controller.Output())
		}
		for _, p := range pods {
			if p.Spec.SchedulerName != schedulerName {
				t.Errorf("pod %s: schedulerName %s, want %s", p.Name, p.Spec.SchedulerName, schedulerName)
			}
		}
		return pods
	}
	waitSwitch := func(want string, timeout time.Duration) time.Time {
		t.Helper()
		var at time.Time
		if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			v, when := switches.last()
			at = when
			return v == want, nil
		}); err != nil {
			t.Fatalf("the switch did not turn %s: values %v\nhand-off controller:\n%s", want, switches.values(), controller.Output())
		}
		return at
	}

	waitSwitch("true", time.Minute)
	createRS("first", 2, nil)
	placed("first", 2, util.SchedulerName)

	// 1. A tenant's undecidable pod, then quiet bounds, then traffic.
	p := st.MakePod().Namespace(app).Name("undecidable").Container("pause").Obj()
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("never-created")}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	if p, err = admin.CoreV1().Pods(app).Create(tCtx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.Spec.SchedulerName != util.SchedulerName {
		t.Fatalf("the undecidable pod got schedulerName %s, want it handed over", p.Spec.SchedulerName)
	}
	quietFrom := switches.len()
	time.Sleep(3 * bound)
	createRS("healthy", 2, nil)
	placed("healthy", 2, util.SchedulerName)
	if got := switches.since(quietFrom); contains(got, "false") {
		t.Fatalf("a tenant's undecidable pod turned the switch off: %v\nhand-off controller:\n%s", got, controller.Output())
	}
	if got, err := admin.CoreV1().Pods(app).Get(tCtx, "undecidable", metav1.GetOptions{}); err != nil || got.Spec.NodeName != "" {
		t.Fatalf("the undecidable pod was decided (node %q) or lost: %v", got.Spec.NodeName, err)
	}

	// 2. The leader's node watch stalls; a node it cannot see, and a pod for it.
	proxy.Stall("/api/v1/nodes")
	util.CreateNode(tCtx, t, admin, util.Node("late-0", map[string]string{
		"kubernetes.azure.com/agentpool": "late", v1.LabelTopologyZone: zones[0]}).Obj())
	nodeAt := time.Now()
	createRS("late", 1, map[string]string{"kubernetes.azure.com/agentpool": "late"})
	off := waitSwitch("false", 2*time.Minute)
	t.Logf("node watch stalled: the switch turned off %s after the node the leader cannot see was created (progress bound %s)", off.Sub(nodeAt).Round(100*time.Millisecond), bound)
	placed("late", 1, admission.DefaultSchedulerName)
	proxy.Resume("/api/v1/nodes")
	waitSwitch("true", time.Minute)
	createRS("resumed", 1, nil)
	placed("resumed", 1, util.SchedulerName)

	// 3. A long wedge: the leader's pod watch stalls for sixteen bounds, longer than the earlier
	// pod-based judge waited (10 bounds after the last stranded pod was handed back) before it
	// handed pods to a wedged leader again as a probe.
	proxy.Stall("/api/v1/pods")
	createRS("wedge", 2, nil)
	createRS("during", 0, nil)
	wedgedAt := waitSwitch("false", 2*time.Minute)
	wedgedFrom := switches.len()
	const window = 16
	for i := range window {
		scale("during", int32(i+1))
		time.Sleep(bound)
	}
	if got := switches.since(wedgedFrom); contains(got, "true") {
		t.Errorf("the switch turned on during the wedge (a probe handed pods to the wedged leader): %v", got)
	}
	placed("during", window, admission.DefaultSchedulerName)
	placed("wedge", 2, admission.DefaultSchedulerName)
	t.Logf("wedged for %s (%d progress bounds) with no pod handed to the leader", time.Since(wedgedAt).Round(time.Second), int(time.Since(wedgedAt)/bound))
	proxy.Resume("/api/v1/pods")
	waitSwitch("true", time.Minute)
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// switchValues records every value the hand-off switch takes, in order, with when it was seen.
type switchValues struct {
	mu   sync.Mutex
	vals []string
	at   []time.Time
}

// watchSwitch records the switch's values from now until ctx ends.
func watchSwitch(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string) *switchValues {
	t.Helper()
	s := &switchValues{}
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", handoff.SwitchConfigMap).String()
		}))
	informer := factory.Core().V1().ConfigMaps().Informer()
	record := func(obj any) {
		if cm, ok := obj.(*v1.ConfigMap); ok {
			s.add(cm.Data[handoff.SwitchKey])
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return s
}

func (s *switchValues) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.vals); n > 0 && s.vals[n-1] == v {
		return
	}
	s.vals, s.at = append(s.vals, v), append(s.at, time.Now())
}

func (s *switchValues) last() (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.vals) == 0 {
		return "", time.Time{}
	}
	return s.vals[len(s.vals)-1], s.at[len(s.at)-1]
}

func (s *switchValues) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.vals)
}

func (s *switchValues) since(i int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.vals[i:]...)
}

func (s *switchValues) values() []string { return s.since(0) }
