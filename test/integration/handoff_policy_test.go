package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestMutatingAdmissionPolicySwitch: the shipped MutatingAdmissionPolicy
// (manifests/admission/policy) follows the hand-off controller's switch
// (manifests/handoff/switch.yaml): while it says "false" (as shipped) a new pod keeps the default
// scheduler and gets the system-node affinity and, for a workload's pod, the degraded spread;
// set to "true", pods are handed to pool-scheduler. In both states the pod is exactly what the
// webhook's Mutator makes of it (both ways in agree), the hand-over marker
// pool-scheduler.io/handed-over included; DaemonSet pods are never touched. Without
// the switch, the policy is skipped: pods keep the default scheduler.
func TestMutatingAdmissionPolicySwitch(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	m, args := shippedMutator(t)
	m.WithDegradedSpread(args.DomainSpread)

	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
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
	enabled, _ := createOptedInNamespaces(tCtx, t, cs)
	setSwitch := func(t *testing.T, value string) {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps("pool-scheduler").Get(tCtx, handoff.SwitchConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data[handoff.SwitchKey] = value
		if _, err := cs.CoreV1().ConfigMaps("pool-scheduler").Update(tCtx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	rs := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	workloadPod := func(name string) *v1.Pod {
		p := st.MakePod().Name(name).Container("pause").Label("app", "web").Label("pod-template-hash", "7c5d").OwnerReference("web-7c5d", rs).Annotation("team", "shop").Obj()
		p.OwnerReferences[0].UID = "5e1f2f2a-0000-4000-8000-000000000002"
		return p
	}
	ownSpread := st.MakePod().Name("own-spread").Container("pause").Label("pod-template-hash", "7c5d").OwnerReference("web-7c5d", rs).
		SpreadConstraint(1, v1.LabelHostname, v1.DoNotSchedule, st.MakeLabelSelector().Exists("app").Obj(), nil, nil, nil, nil).Obj()
	ownSpread.OwnerReferences[0].UID = "5e1f2f2a-0000-4000-8000-000000000002"
	daemon := st.MakePod().Name("daemon").Container("pause").Label("controller-revision-hash", "1").OwnerReference("ds", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}).Obj()
	daemon.OwnerReferences[0].UID = "5e1f2f2a-0000-4000-8000-000000000001"
	cases := []*v1.Pod{
		workloadPod("web"),
		st.MakePod().Name("bare").Container("pause").Obj(),
		ownSpread,
		daemon,
		st.MakePod().Name("critical").Container("pause").Toleration("CriticalAddonsOnly").Label("pod-template-hash", "1").OwnerReference("c", rs).Obj(),
	}
	check := func(t *testing.T, handOver bool, suffix string) {
		for _, c := range cases {
			t.Run(c.Name, func(t *testing.T) {
				pod := c.DeepCopy()
				pod.Name += suffix
				pod.Namespace = enabled
				if len(pod.OwnerReferences) > 0 && pod.OwnerReferences[0].UID == "" {
					pod.OwnerReferences[0].UID = "5e1f2f2a-0000-4000-8000-000000000003"
				}
				want := pod.DeepCopy()
				want.Spec.SchedulerName = admission.DefaultSchedulerName
				if handOver {
					m.Mutate(want)
				} else {
					m.MutateDegraded(want)
				}
				got, err := cs.CoreV1().Pods(enabled).Create(tCtx, pod, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Spec.SchedulerName != want.Spec.SchedulerName {
					t.Errorf("schedulerName %q, want %q", got.Spec.SchedulerName, want.Spec.SchedulerName)
				}
				// The hand-over marker goes with the schedulerName, others' annotations stay.
				if diff := cmp.Diff(want.Annotations, got.Annotations); diff != "" {
					t.Errorf("annotations are not the Mutator's (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want.Spec.Affinity, got.Spec.Affinity); diff != "" {
					t.Errorf("affinity is not the Mutator's (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want.Spec.TopologySpreadConstraints, got.Spec.TopologySpreadConstraints); diff != "" {
					t.Errorf("topology spread is not the Mutator's (-want +got):\n%s", diff)
				}
			})
		}
	}

	// As shipped the switch says "false": wait until the policy is active (the probe gets the
	// system-node affinity), then every case is the degraded mutation.
	waitForPolicy(tCtx, t, cs, enabled, func(p *v1.Pod) bool {
		return p.Spec.Affinity != nil && p.Spec.SchedulerName == admission.DefaultSchedulerName
	})
	t.Run("switch off", func(t *testing.T) { check(t, false, "-off") })

	setSwitch(t, "true")
	waitForPolicy(tCtx, t, cs, enabled, func(p *v1.Pod) bool { return p.Spec.SchedulerName == util.SchedulerName })
	t.Run("switch on", func(t *testing.T) { check(t, true, "-on") })

	// No switch: the binding's parameter is missing, so the policy is skipped.
	if err := cs.CoreV1().ConfigMaps("pool-scheduler").Delete(tCtx, handoff.SwitchConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(tCtx, t, cs, enabled, func(p *v1.Pod) bool {
		return p.Spec.SchedulerName == admission.DefaultSchedulerName && p.Spec.Affinity == nil
	})
}

// waitForPolicy creates probe pods in ns until one satisfies ok: admission plugins see new
// policies and parameters through informers, a moment after they change.
func waitForPolicy(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, ok func(*v1.Pod) bool) {
	t.Helper()
	i := 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		p, err := cs.CoreV1().Pods(ns).Create(ctx, st.MakePod().GenerateName(fmt.Sprintf("probe-%d-", i)).Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return ok(p), nil
	})
	if err != nil {
		t.Fatalf("no probe pod in %s came out as expected: %v", ns, err)
	}
}
