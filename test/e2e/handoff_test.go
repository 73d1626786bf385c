package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestHandoffAsInstalled: the whole hand-off as shipped, with every part a real process or
// controller: bin/pool-scheduler (the shipped configuration, leader-elected), the webhook and the
// hand-off controller (bin/pool-labeler with their Deployments' arguments, as their
// ServiceAccounts, under the shipped RBAC and ValidatingAdmissionPolicy), the cluster's default
// scheduler (kube-scheduler's default profile) and the ReplicaSet controller.
//
//  1. pool-scheduler up: a ReplicaSet's pods are handed over and bound;
//  2. every pool-scheduler replica stopped: pods handed over while the Lease was still renewed
//     (by a leader that schedules nothing, before --progress-bound shows it) strand; once pool-scheduler has had no leader for --handback-after, the stranded
//     ReplicaSet pods are deleted and recreated for the default scheduler, which places them off
//     the system pool and spread over zones within skew 1; a bare pod is only reported (a
//     StrandedPod event); running pods are never touched; pods created meanwhile go to the
//     default scheduler directly;
//  3. pool-scheduler back: new pods are handed over again;
//  4. its writes are bounded: deleting a bound or a bare pod, or writing the Lease, is refused.
func TestHandoffAsInstalled(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	const ns = "pool-scheduler"

	w := installWebhook(tCtx, t, cp)
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
	sa := clientFor(t, saCfg)
	waitAllowed(tCtx, t, sa, "pool-scheduler-handoff", []authorizationv1.ResourceAttributes{
		{Verb: "watch", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "pool-scheduler"},
		{Verb: "update", Resource: "configmaps", Namespace: ns, Name: handoff.SwitchConfigMap},
		{Verb: "delete", Resource: "pods"},
	})

	// Nodes: two user pools' worth in three zones, and a system pool.
	zones := []string{"zone-1", "zone-2", "zone-3"}
	for i := range 6 {
		util.CreateNode(tCtx, t, admin, util.Node(fmt.Sprintf("user-%d", i), map[string]string{
			"kubernetes.azure.com/agentpool": "user", v1.LabelTopologyZone: zones[i%3]}).Obj())
	}
	for i := range 2 {
		util.CreateNode(tCtx, t, admin, util.Node(fmt.Sprintf("system-%d", i), map[string]string{
			"kubernetes.azure.com/agentpool": "system", "kubernetes.azure.com/mode": "system", v1.LabelTopologyZone: zones[i]}).Obj())
	}

	// The cluster's default scheduler and ReplicaSet controller.
	util.StartSchedulerBinary(t, util.UpstreamConfigFor(t, cp))
	factory := informers.NewSharedInformerFactory(admin, 0)
	rsc := replicaset.NewReplicaSetController(tCtx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), admin, 100)
	factory.Start(tCtx.Done())
	go rsc.Run(tCtx, 2)

	// pool-scheduler as shipped (leader election on the Lease pool-scheduler/pool-scheduler).
	startScheduler := func() *util.SchedulerProcess {
		return util.StartSchedulerBinary(t, util.ShippedConfigFor(t, cp))
	}
	scheduler := startScheduler()

	// The hand-off controller with its Deployment's arguments; --handback-after shortened to
	// 20 s (the shipped 2m would only make the test slower), syncing every second.
	args := containerArgs(deployment, map[string]string{"--config": util.ShippedConfigPath(), "--handback-after": "20s"})
	args = append(args, "--kubeconfig="+kubeconfig, "--switch-namespace="+ns, "--leader-elect-namespace="+ns,
		"--sync-interval=1s", "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	controller := util.StartProcess(t, util.LabelerBinary(t), args...)

	opted, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "team-", Labels: map[string]string{profile.NamespaceLabel: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := opted.Name
	createRS := func(name string, replicas int32) *appsv1.ReplicaSet {
		t.Helper()
		labels := map[string]string{"app": name, "pod-template-hash": name + "-h"}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: app},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}},
				},
			},
		}
		rs, err := admin.AppsV1().ReplicaSets(app).Create(tCtx, rs, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	podsOf := func(name string) []v1.Pod {
		pods, err := admin.CoreV1().Pods(app).List(tCtx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	// placed waits until the ReplicaSet's n pods are bound, and checks them: scheduled by
	// schedulerName, none on a system node, spread over zones within skew 1.
	placed := func(t *testing.T, name string, n int, schedulerName string) []v1.Pod {
		t.Helper()
		var pods []v1.Pod
		err := wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
			pods = podsOf(name)
			bound := 0
			for _, p := range pods {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					bound++
				}
			}
			return bound == n && len(pods) == n, nil
		})
		if err != nil {
			t.Fatalf("ReplicaSet %s: %d pods, not all %d bound: %v\nhand-off controller:\n%s", name, len(pods), n, err, controller.Output())
		}
		perZone := map[string]int{}
		for _, p := range pods {
			if p.Spec.SchedulerName != schedulerName {
				t.Errorf("pod %s: schedulerName %s, want %s", p.Name, p.Spec.SchedulerName, schedulerName)
			}
			// In degraded mode the spread is the hand-off's constraints, not the default
			// scheduler's own defaults: zone and host, selecting the ReplicaSet's revision.
			var keys []string
			for _, c := range p.Spec.TopologySpreadConstraints {
				if c.WhenUnsatisfiable == v1.ScheduleAnyway && c.LabelSelector != nil && c.LabelSelector.MatchLabels["pod-template-hash"] == name+"-h" {
					keys = append(keys, c.TopologyKey)
				}
			}
			if wantKeys := map[bool][]string{true: {v1.LabelTopologyZone, v1.LabelHostname}}[schedulerName == admission.DefaultSchedulerName]; !slices.Equal(keys, wantKeys) {
				t.Errorf("pod %s: spread over %v, want %v", p.Name, keys, wantKeys)
			}
			if strings.HasPrefix(p.Spec.NodeName, "system-") {
				t.Errorf("pod %s landed on the system pool (%s)", p.Name, p.Spec.NodeName)
			}
			perZone[zones[nodeIndex(p.Spec.NodeName)%3]]++
		}
		lo, hi := n, 0
		for _, z := range zones {
			lo, hi = min(lo, perZone[z]), max(hi, perZone[z])
		}
		if hi-lo > 1 {
			t.Errorf("ReplicaSet %s over zones %v: skew %d, want <= 1", name, perZone, hi-lo)
		}
		return pods
	}

	// 1. pool-scheduler up: handed over (once the webhook has seen the leader's Lease).
	waitForHandOff(tCtx, t, admin, app, util.SchedulerName)
	createRS("before", 3)
	running := placed(t, "before", 3, util.SchedulerName)

	// 2. Every replica stopped. Pods handed over just before (within the lease duration) strand:
	// a Lease renewed by a leader that schedules nothing (as a wedged replica would) holds that
	// window open until the judges' --progress-bound (30 s) shows the wedge, long enough for
	// three pods of a ReplicaSet and a bare one to strand.
	scheduler.Kill(t)
	stopWedged := renewLease(tCtx, t, admin, ns, "pool-scheduler")
	waitForHandOff(tCtx, t, admin, app, util.SchedulerName)
	stranded := createRS("stranded", 3)
	bare, err := admin.CoreV1().Pods(app).Create(tCtx, st.MakePod().Name("bare").Container("pause").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bare.Spec.SchedulerName != util.SchedulerName {
		t.Fatalf("a pod created while the Lease is renewed got schedulerName %s; want it handed over", bare.Spec.SchedulerName)
	}
	if err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(podsOf("stranded")) == 3, nil
	}); err != nil {
		t.Fatalf("the ReplicaSet did not create its pods: %v", err)
	}
	strandedUIDs := sets.New[types.UID]()
	for _, p := range podsOf("stranded") {
		if p.Spec.SchedulerName == util.SchedulerName {
			strandedUIDs.Insert(p.UID)
		}
	}
	if strandedUIDs.Len() != 3 {
		t.Fatalf("%d pods of the ReplicaSet were handed over while the Lease was renewed, want 3", strandedUIDs.Len())
	}
	stopWedged()
	lease, err := admin.CoordinationV1().Leases(ns).Get(tCtx, "pool-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stoppedAt := lease.Spec.RenewTime.Time

	// New pods go to the default scheduler once the webhook stops handing over; the time
	// from the leader's last renewal to that is reported (a measurement, not a bound).
	firstDefault := waitForHandOff(tCtx, t, admin, app, admission.DefaultSchedulerName)
	t.Logf("from the Lease's last renewal to the first pod left with the default scheduler: %s (lease duration 15 s)", firstDefault.Sub(stoppedAt).Round(100*time.Millisecond))
	createRS("during", 6)
	placed(t, "during", 6, admission.DefaultSchedulerName)

	// The stranded ReplicaSet pods are handed back: recreated, placed by the default scheduler.
	recovered := placed(t, "stranded", 3, admission.DefaultSchedulerName)
	for _, p := range recovered {
		if strandedUIDs.Has(p.UID) {
			t.Errorf("pod %s is still the stranded one", p.Name)
		}
	}
	events, err := admin.CoreV1().Events(app).List(tCtx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + stranded.Name})
	if err != nil {
		t.Fatal(err)
	}
	if !hasEvent(events.Items, "HandedBack") {
		t.Errorf("no HandedBack event on the ReplicaSet; events: %v", eventReasons(events.Items))
	}
	// The bare pod is reported, not deleted.
	if err := wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := admin.CoreV1().Events(app).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bare"})
		return err == nil && hasEvent(events.Items, "StrandedPod"), nil
	}); err != nil {
		t.Errorf("no StrandedPod event on the bare pod: %v", err)
	}
	if p, err := admin.CoreV1().Pods(app).Get(tCtx, "bare", metav1.GetOptions{}); err != nil || p.UID != bare.UID {
		t.Errorf("the bare pod was deleted: %v", err)
	}
	// Running pods were never touched.
	for _, p := range running {
		got, err := admin.CoreV1().Pods(app).Get(tCtx, p.Name, metav1.GetOptions{})
		if err != nil || got.UID != p.UID {
			t.Errorf("running pod %s was touched: %v", p.Name, err)
		}
	}
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(tCtx, handoff.SwitchConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[handoff.SwitchKey] != "false" {
		t.Errorf("switch %q while pool-scheduler is down, want false", cm.Data[handoff.SwitchKey])
	}

	// 4. Bounded: the controller's account may not delete a bound pod or a bare one, nor write
	// the scheduler's Lease.
	errBound := sa.CoreV1().Pods(app).Delete(tCtx, running[0].Name, metav1.DeleteOptions{})
	errBare := sa.CoreV1().Pods(app).Delete(tCtx, "bare", metav1.DeleteOptions{})
	lease, err = admin.CoordinationV1().Leases(ns).Get(tCtx, "pool-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, errLease := sa.CoordinationV1().Leases(ns).Update(tCtx, lease, metav1.UpdateOptions{})
	_, errSecrets := sa.CoreV1().Secrets(ns).List(tCtx, metav1.ListOptions{})
	for name, err := range map[string]error{
		"delete a bound pod":           errBound,
		"delete a bare pod":            errBare,
		"update the scheduler's Lease": errLease,
		"list Secrets":                 errSecrets,
	} {
		if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}

	// 3. pool-scheduler back: handed over again, and scheduled by it.
	startScheduler()
	waitForHandOff(tCtx, t, admin, app, util.SchedulerName)
	if err := wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, handoff.SwitchConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data[handoff.SwitchKey] == "true", nil
	}); err != nil {
		t.Errorf("the switch did not come back on: %v", err)
	}
	createRS("after", 3)
	placed(t, "after", 3, util.SchedulerName)
	if forbidden.MatchString(controller.Output()) || forbidden.MatchString(w.proc.Output()) {
		t.Errorf("a component was refused a request it needs:\nhand-off controller:\n%s\nwebhook:\n%s", controller.Output(), w.proc.Output())
	}
}

// waitForHandOff creates probe pods in ns until one comes out of admission with schedulerName,
// and returns when it did.
func waitForHandOff(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, schedulerName string) time.Time {
	t.Helper()
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, st.MakePod().GenerateName("probe-").Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		at = time.Now()
		// Probes are not left pending for anyone.
		_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		return p.Spec.SchedulerName == schedulerName, nil
	})
	if err != nil {
		t.Fatalf("no pod in %s got schedulerName %s: %v", ns, schedulerName, err)
	}
	return at
}

// containerArgs returns the first container's arguments of a workload object (a Deployment's or
// a Job's pod template), with the values of the flags in set replaced (what a pod has and a
// process here does not: mounted files, directories, Service names).
func containerArgs(obj *unstructured.Unstructured, set map[string]string) []string {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		arg := a.(string)
		if flag, _, ok := strings.Cut(arg, "="); ok {
			if v, ok := set[flag]; ok {
				arg = flag + "=" + v
			}
		}
		args = append(args, arg)
	}
	return args
}

func nodeIndex(node string) int {
	var i int
	_, _ = fmt.Sscanf(node[strings.LastIndex(node, "-")+1:], "%d", &i)
	return i
}

func hasEvent(events []v1.Event, reason string) bool {
	for _, e := range events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func eventReasons(events []v1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
