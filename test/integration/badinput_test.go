package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// rawLabelSet is a NodePoolLabelSet as untyped JSON, so that a test can write what the Go type
// cannot hold (wrong types).
func rawLabelSet(ns, name string, spec any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": labelsv1alpha1.SchemeGroupVersion.String(),
		"kind":       "NodePoolLabelSet",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
}

// wrongTypes are NodePoolLabelSet specs whose JSON types do not match the API.
var wrongTypes = []struct {
	name string
	spec any
}{
	{name: "labels-is-a-string", spec: map[string]any{"labels": "example.com/a=1"}},
	{name: "value-is-a-number", spec: map[string]any{"labels": map[string]any{"example.com/n": int64(5)}}},
	{name: "value-is-an-object", spec: map[string]any{"labels": map[string]any{"example.com/o": map[string]any{"a": "b"}}}},
	{name: "spec-is-a-list", spec: []any{"example.com/a"}},
}

// TestShippedCRDRejectsWrongTypes: the shipped CRD refuses NodePoolLabelSets whose fields have
// the wrong JSON type (invalid keys and values are covered by TestNodePoolLabelSetCRDValidation).
func TestShippedCRDRejectsWrongTypes(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	ns := util.CreateNamespace(tCtx, t, cp.Client, "crd-types")
	for _, tt := range wrongTypes {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).Create(tCtx, rawLabelSet(ns, tt.name, tt.spec), metav1.CreateOptions{})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "spec") {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
}

// installLooseCRD replaces the shipped CRD by a copy without schema validation, as an older or
// hand-edited CRD would be, and waits until the apiserver serves it.
func installLooseCRD(tCtx ktesting.TContext, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(tCtx, "nodepoollabelsets.labels.banzaicloud.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: ptr.To(true),
		}}
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(tCtx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("loosening the CRD: %v", err)
	}
	// The schema change reaches the serving handler shortly after the update.
	ns := util.CreateNamespace(tCtx, t, cp.Client, "probe")
	err = wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).Create(ctx, rawLabelSet(ns, "probe", map[string]any{"labels": "x"}), metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the loose CRD is not served")
	}
}

// gaugeValue reads a gauge from the process's legacy registry (where the scheduler's metrics are).
func gaugeValue(t *testing.T, name string) (float64, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestBadLabelSetsThroughALooseCRD forces invalid NodePoolLabelSets in through a CRD without
// validation (invalid and reserved keys, invalid values, wrong JSON types) and runs the
// scheduler with the shipped profile and the labeler against them: neither crashes, the bad
// entries are reported (set status, scheduler log and metric), the valid part of a set is still
// applied and enforced, and other pools keep labelling and scheduling.
func TestBadLabelSetsThroughALooseCRD(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	installLooseCRD(tCtx, t, cp)
	setNS := util.CreateNamespace(tCtx, t, cs, "loose")
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")

	sets := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(setNS)
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := sets.Create(tCtx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s through the loose CRD: %v", u.GetName(), err)
		}
	}
	create(rawLabelSet(setNS, "good", map[string]any{"labels": map[string]any{"example.com/tier": "good"}}))
	create(rawLabelSet(setNS, "mixed", map[string]any{"labels": map[string]any{
		"example.com/ok":     "1",
		"bad key":            "1",
		"kubernetes.io/arch": "arm64",
		"example.com/value":  "not valid!",
	}}))
	for _, tt := range wrongTypes {
		create(rawLabelSet(setNS, tt.name, tt.spec))
	}

	profile := util.LoadShippedConfig(t).Profiles[0]
	util.StartScheduler(t, cp, profile)
	util.StartLabeler(t, cp, labeler.Options{})

	// One node and one pinned pod per pool.
	pools := []string{"good", "mixed", "value-is-a-number", "labels-is-a-string", "spec-is-a-list"}
	for _, p := range pools {
		util.CreateNode(tCtx, t, cs, util.Node(p+"-0", map[string]string{poolKey: p}).Obj())
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, p+"-pod").NodeSelector(map[string]string{v1.LabelHostname: p + "-0"}).Obj())
	}
	// A node the labeler labelled before its pool's only set became unreadable: its managed
	// label is still on it. One rule for it and the new node above: both are used.
	prelabelled := util.Node("labels-is-a-string-old", map[string]string{poolKey: "labels-is-a-string", "example.com/a": "1"}).Obj()
	prelabelled.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/a"]`}
	util.CreateNode(tCtx, t, cs, prelabelled)
	util.CreatePod(tCtx, t, cs, util.Pod(podNS, "prelabelled-pod").NodeSelector(map[string]string{v1.LabelHostname: "labels-is-a-string-old"}).Obj())

	t.Run("other pools are labelled and scheduled", func(t *testing.T) {
		util.WaitForPodBound(tCtx, t, cs, podNS, "good-pod", bindTimeout)
		n, err := cs.CoreV1().Nodes().Get(tCtx, "good-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["example.com/tier"] != "good" {
			t.Errorf("good-0 labels %v, want example.com/tier=good", n.Labels)
		}
	})

	t.Run("the valid part of a set is applied and enforced, the rest reported", func(t *testing.T) {
		util.WaitForPodBound(tCtx, t, cs, podNS, "mixed-pod", bindTimeout)
		n, err := cs.CoreV1().Nodes().Get(tCtx, "mixed-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Annotations[pool.ManagedLabelsAnnotation]; got != `["example.com/ok"]` {
			t.Errorf("mixed-0 managed labels %s, want only the valid label", got)
		}
		set := waitLabelSetStatus(t, tCtx, cp, setNS, "mixed", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.State == labelsv1alpha1.SyncStateError
		})
		for _, want := range []string{"bad key", "kubernetes.io/arch"} {
			if !strings.Contains(set.Status.Message, want) {
				t.Errorf("status message %q does not mention %q", set.Status.Message, want)
			}
		}
		if v, ok := gaugeValue(t, "pool_scheduler_nodepoolready_labelset_problems"); !ok || v < 3 {
			t.Errorf("pool_scheduler_nodepoolready_labelset_problems = %v (registered %v), want >= 3", v, ok)
		}
	})

	t.Run("wrong-typed sets are reported and do not block their pools", func(t *testing.T) {
		// A set that does not decode has no labels to wait for (the scheduler logs it).
		for _, p := range []string{"value-is-a-number", "labels-is-a-string", "spec-is-a-list", "prelabelled"} {
			util.WaitForPodBound(tCtx, t, cs, podNS, p+"-pod", bindTimeout)
		}
		// The labeler left the pre-labelled node as it was, and said why.
		if n, err := cs.CoreV1().Nodes().Get(tCtx, "labels-is-a-string-old", metav1.GetOptions{}); err != nil || n.Labels["example.com/a"] != "1" {
			t.Errorf("the pre-labelled node changed: %v %v", n.GetLabels(), err)
		}
		ev := waitEvent(tCtx, t, cs, setNS, "NodePoolLabelSet", "labels-is-a-string", "UnreadableSpec")
		if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, "cannot be read") {
			t.Errorf("UnreadableSpec event %q (%s)", ev.Message, ev.Type)
		}
		for _, tt := range wrongTypes {
			set := waitLabelSetStatus(t, tCtx, cp, setNS, tt.name, func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
				return s.State == labelsv1alpha1.SyncStateError
			})
			t.Logf("%s: %s", tt.name, set.Status.Message)
		}
	})

	t.Run("a fixed set is picked up", func(t *testing.T) {
		u, err := sets.Get(tCtx, "value-is-a-number", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["spec"] = map[string]any{"labels": map[string]any{"example.com/n": "5"}}
		if _, err := sets.Update(tCtx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, "fixed-pod").NodeSelector(map[string]string{v1.LabelHostname: "value-is-a-number-0", "example.com/n": "5"}).Obj())
		util.WaitForPodBound(tCtx, t, cs, podNS, "fixed-pod", bindTimeout)
		waitLabelSetStatus(t, tCtx, cp, setNS, "value-is-a-number", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.State == labelsv1alpha1.SyncStateSynced
		})
	})
}

// TestDuplicateLabelSets: two NodePoolLabelSets for one pool (same name, two namespaces, both
// read: a cluster-wide labelSetNamespace) are merged by the scheduler and the labeler alike: the
// union of the labels they agree on. A key they give different values is a conflict, not a
// silent pick: neither value is applied, both sets get a LabelSetConflict condition and a
// Warning event, and the scheduler uses a node of the pool only if it already carries one of
// the values. Deleting one set ends the conflict.
func TestDuplicateLabelSets(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	nsA := util.CreateNamespace(tCtx, t, cs, "dupa") // sorts before dupb-...
	nsB := util.CreateNamespace(tCtx, t, cs, "dupb")
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(nsA, "dup", map[string]string{"example.com/a": "1", "example.com/shared": "a"}))
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(nsB, "dup", map[string]string{"example.com/b": "2", "example.com/shared": "b"}))

	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])
	util.StartLabeler(t, cp, labeler.Options{})
	pin := func(name, node string) {
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, name).NodeSelector(map[string]string{v1.LabelHostname: node}).Obj())
	}
	nodeLabels := func(name string) map[string]string {
		n, err := cs.CoreV1().Nodes().Get(tCtx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels
	}

	t.Run("the agreed labels are applied, the disputed key is not, and the node waits", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("dup-0", map[string]string{poolKey: "dup"}).Obj())
		pin("dup-0-pod", "dup-0")
		// (The message may still name the missing agreed labels: once they land the node is
		// still not ready, so the scheduler does not retry the pod, rightly.)
		util.WaitForPodUnschedulable(tCtx, t, cs, podNS, "dup-0-pod", "", bindTimeout)
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(context.Context) (bool, error) {
			l := nodeLabels("dup-0")
			return l["example.com/a"] == "1" && l["example.com/b"] == "2", nil
		})
		if err != nil {
			t.Fatalf("dup-0 not labelled with the agreed labels: %v", nodeLabels("dup-0"))
		}
		if v, ok := nodeLabels("dup-0")["example.com/shared"]; ok {
			t.Errorf("dup-0 got the disputed key: example.com/shared=%s", v)
		}
		for _, ns := range []string{nsA, nsB} {
			set := waitLabelSetStatus(t, tCtx, cp, ns, "dup", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
				// The status follows node events: wait until it reflects the agreed labels landing
				// (until then dup-0 is rightly held for a missing agreed label).
				return meta.IsStatusConditionTrue(s.Conditions, labeler.ConditionLabelSetConflict) && s.NodesHeld == 1 &&
					len(s.HeldNodes) == 1 && s.HeldNodes[0].Reason == labelsv1alpha1.HeldLabelSetConflict
			})
			c := meta.FindStatusCondition(set.Status.Conditions, labeler.ConditionLabelSetConflict)
			for _, want := range []string{`"a" in ` + nsA + "/dup", `"b" in ` + nsB + "/dup", "example.com/shared"} {
				if !strings.Contains(c.Message, want) {
					t.Errorf("%s/dup LabelSetConflict message %q does not contain %q", ns, c.Message, want)
				}
			}
			if h := set.Status.HeldNodes; len(h) != 1 || h[0].Reason != labelsv1alpha1.HeldLabelSetConflict || h[0].Key != "example.com/shared" {
				t.Errorf("%s/dup held nodes %+v, want dup-0 held by the conflict on example.com/shared", ns, h)
			}
			ev := waitEvent(tCtx, t, cs, ns, "NodePoolLabelSet", "dup", "LabelSetConflict")
			if ev.Type != v1.EventTypeWarning {
				t.Errorf("%s/dup LabelSetConflict event is %s", ns, ev.Type)
			}
		}
		if p, err := cs.CoreV1().Pods(podNS).Get(tCtx, "dup-0-pod", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
			t.Errorf("dup-0-pod bound to %q (%v) while its node's pool is in conflict", p.Spec.NodeName, err)
		}
	})

	t.Run("a node that carries one of the values is used", func(t *testing.T) {
		util.CreateNode(tCtx, t, cs, util.Node("dup-1", map[string]string{poolKey: "dup", "example.com/a": "1", "example.com/b": "2", "example.com/shared": "b"}).Obj())
		pin("dup-1-pod", "dup-1")
		util.WaitForPodBound(tCtx, t, cs, podNS, "dup-1-pod", bindTimeout)
		if got := nodeLabels("dup-1")["example.com/shared"]; got != "b" {
			t.Errorf("dup-1's example.com/shared changed to %q", got)
		}
	})

	t.Run("deleting one set ends the conflict", func(t *testing.T) {
		util.DeleteLabelSet(tCtx, t, cp, nsA, "dup")
		util.WaitForPodBound(tCtx, t, cs, podNS, "dup-0-pod", bindTimeout)
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(context.Context) (bool, error) {
			l := nodeLabels("dup-0")
			_, hasA := l["example.com/a"]
			return l["example.com/shared"] == "b" && !hasA, nil
		})
		if err != nil {
			t.Errorf("dup-0 not relabelled for the remaining set: %v", nodeLabels("dup-0"))
		}
		waitLabelSetStatus(t, tCtx, cp, nsB, "dup", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
			return s.State == labelsv1alpha1.SyncStateSynced && s.NodesReady == 2 &&
				meta.IsStatusConditionFalse(s.Conditions, labeler.ConditionLabelSetConflict)
		})
	})
}

// TestNodesWithThousandsOfLabels: nodes carrying 5000 labels each are labelled by the labeler
// and used by the scheduler with every plugin still correct: a pod waits for the pool's labels
// (NodePoolReady), replicas spread one per zone (DomainSpread), user pods stay off the system
// node and system pods may use it (SystemPoolGuard).
func TestNodesWithThousandsOfLabels(t *testing.T) {
	const manyLabels = 5000
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	setNS := util.CreateNamespace(tCtx, t, cs, "labelsets")
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(setNS, "big", map[string]string{"example.com/tier": "big"}))

	bigNode := func(name string, labels map[string]string) *v1.Node {
		n := util.Node(name, labels).Obj()
		for i := 0; i < manyLabels; i++ {
			n.Labels[fmt.Sprintf("example.com/label-%04d", i)] = fmt.Sprintf("value-%d", i)
		}
		return n
	}
	const zoneKey = "topology.kubernetes.io/zone"
	for i := 0; i < 3; i++ {
		util.CreateNode(tCtx, t, cs, bigNode(fmt.Sprintf("big-%d", i), map[string]string{poolKey: "big", zoneKey: fmt.Sprintf("zone-%d", i), updateDomainKey: "0"}))
	}
	util.CreateNode(tCtx, t, cs, bigNode("sys-0", map[string]string{poolKey: "system"}))

	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])

	t.Run("a pod waits for the pool labels, which the labeler applies", func(t *testing.T) {
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, "early").NodeSelector(map[string]string{v1.LabelHostname: "big-0"}).Obj())
		util.WaitForPodUnschedulable(tCtx, t, cs, podNS, "early", pool.LabelsNotApplied.String(), bindTimeout)
		util.StartLabeler(t, cp, labeler.Options{})
		util.WaitForPodBound(tCtx, t, cs, podNS, "early", bindTimeout)
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
			for i := 0; i < 3; i++ {
				n, err := cs.CoreV1().Nodes().Get(ctx, fmt.Sprintf("big-%d", i), metav1.GetOptions{})
				if err != nil || n.Labels["example.com/tier"] != "big" || n.Annotations[pool.ManagedLabelsAnnotation] != `["example.com/tier"]` {
					return false, nil
				}
				if len(n.Labels) < manyLabels+5 {
					return false, fmt.Errorf("%s has %d labels, want the %d it was created with and the pool's", n.Name, len(n.Labels), manyLabels)
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("the labeler did not apply the set to every big node: %v", err)
		}
	})

	t.Run("replicas spread one per zone, never on the system node", func(t *testing.T) {
		rs := createReplicaSet(tCtx, t, cs, podNS, "web", 3)
		for i := 0; i < 3; i++ {
			createReplica(tCtx, t, cs, rs, i, false)
		}
		pods := util.WaitForPods(tCtx, t, cs, podNS, 2*time.Minute, func(pods []v1.Pod) (bool, error) {
			bound := 0
			for _, p := range pods {
				if p.Spec.NodeName == "sys-0" {
					return false, fmt.Errorf("user pod %s bound to the system node", p.Name)
				}
				if p.Spec.NodeName != "" && p.Name != "early" {
					bound++
				}
			}
			return bound == 3, nil
		})
		perNode := map[string]int{}
		for _, p := range pods {
			if p.Name != "early" {
				perNode[p.Spec.NodeName]++
			}
		}
		if diff := cmp.Diff(map[string]int{"big-0": 1, "big-1": 1, "big-2": 1}, perNode); diff != "" {
			t.Errorf("replicas per node (-want +got):\n%s", diff)
		}
	})

	t.Run("system node: user pods refused, system pods placed", func(t *testing.T) {
		pin := map[string]string{v1.LabelHostname: "sys-0"}
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, "user-on-sys").NodeSelector(pin).Obj())
		util.WaitForPodUnschedulable(tCtx, t, cs, podNS, "user-on-sys", "node is in the system pool", bindTimeout)
		util.CreatePod(tCtx, t, cs, util.Pod("kube-system", "system-on-sys").NodeSelector(pin).Obj())
		util.WaitForPodBound(tCtx, t, cs, "kube-system", "system-on-sys", bindTimeout)
	})
}
