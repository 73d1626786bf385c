package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestRefusedKeysAreNotObeyed (#34): the labeler's admission policy refuses, whatever a write
// declares managed, the labels SystemPoolGuard's systemNodeSelector reads and reserved
// kubernetes.io/k8s.io ones, and it refuses the whole write. A NodePoolLabelSet naming one (the
// selector's keys are configuration, so the CRD lets them in; a reserved key only through an
// older CRD) used to leave its pool's nodes without any of its labels, held by the gate forever.
// With the labeler as installed (its ServiceAccount, RBAC and admission policy, the shipped
// scheduler configuration) and the scheduler with the shipped profile, the set's other labels
// are applied, the node is used, the refused keys are not written and the set is reported
// (status, a LabelsIgnored event, the scheduler's problems metric).
func TestRefusedKeysAreNotObeyed(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const ns = "pool-scheduler" // the release namespace: the shipped labelSetNamespaces and RBAC
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.ApplyAccessObjects(tCtx, t, cp, util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "labeler", "controller")))
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")

	const reserved = "node.kubernetes.io/exclude-from-external-load-balancers"
	labels := map[string]any{"example.com/tier": "gold", configv1.AKSModeLabelKey: "system"}
	t.Run("the shipped CRD lets the system-node key in", func(t *testing.T) {
		if _, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).Create(tCtx, rawLabelSet(ns, "user", map[string]any{"labels": labels}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("a set naming %s: %v, want accepted (the CRD cannot know the selector)", configv1.AKSModeLabelKey, err)
		}
	})
	// A reserved key the shipped CRD refuses, stored through an older one.
	installLooseCRD(tCtx, t, cp)
	labels[reserved] = "true"
	if _, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).Create(tCtx, rawLabelSet(ns, "user", map[string]any{"labels": labels}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("storing the set: %v", err)
	}
	util.CreateNode(tCtx, t, cs, util.Node("user-0", map[string]string{poolKey: "user"}).Obj())

	util.StartScheduler(t, cp, util.LoadShippedConfigAsShipped(t).Profiles[0])
	saCfg, _ := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-labeler", nil)
	util.StartLabelerAs(t, saCfg, util.ShippedLabelerOptions(t))

	util.CreatePod(tCtx, t, cs, util.Pod(podNS, "pinned").NodeSelector(map[string]string{v1.LabelHostname: "user-0"}).Obj())
	util.WaitForPodBound(tCtx, t, cs, podNS, "pinned", bindTimeout)

	n, err := cs.CoreV1().Nodes().Get(tCtx, "user-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["example.com/tier"] != "gold" || n.Annotations[pool.ManagedLabelsAnnotation] != `["example.com/tier"]` {
		t.Errorf("the set's other label is not applied as managed: labels %v annotations %v", n.Labels, n.Annotations)
	}
	for _, k := range []string{configv1.AKSModeLabelKey, reserved} {
		if v, ok := n.Labels[k]; ok {
			t.Errorf("the node carries %s=%q, which no set may set", k, v)
		}
	}

	set := waitLabelSetStatus(t, tCtx, cp, ns, "user", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
		return s.State == labelsv1alpha1.SyncStateError && s.NodesReady == 1
	})
	for _, want := range []string{configv1.AKSModeLabelKey, "systemNodeSelector", reserved, "reserved for Kubernetes"} {
		if !strings.Contains(set.Status.Message, want) {
			t.Errorf("status message %q does not say %q", set.Status.Message, want)
		}
	}
	if !meta.IsStatusConditionTrue(set.Status.Conditions, labeler.ConditionNodesReady) || meta.IsStatusConditionTrue(set.Status.Conditions, labeler.ConditionSynced) {
		t.Errorf("conditions %+v, want NodesReady true and Synced false", set.Status.Conditions)
	}
	if v, ok := gaugeValue(t, "pool_scheduler_nodepoolready_labelset_problems"); !ok || v < 2 {
		t.Errorf("pool_scheduler_nodepoolready_labelset_problems = %v (registered %v), want >= 2", v, ok)
	}
	err = wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": "user", "reason": "LabelsIgnored"}.String()})
		if err != nil || len(evs.Items) == 0 {
			return false, nil
		}
		msg := evs.Items[0].Message
		return strings.Contains(msg, configv1.AKSModeLabelKey) && strings.Contains(msg, reserved), nil
	})
	if err != nil {
		t.Errorf("no LabelsIgnored event on the set naming both keys: %v", err)
	}
}
