package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestGateInstalledBesideTheOperator runs the built pool-scheduler as the kustomize overlay for
// clusters that keep the nodepool-labels-operator installs it (its configuration: the gate reads
// the operator's NodePoolLabelSets in pipeline-system; no labeler of ours): pods created before
// their pool's nodes join bind to no node before the operator has labelled it (its annotation
// format: every key, unsorted, the pool-name label included), and bind once it has.
func TestGateInstalledBesideTheOperator(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	for _, ns := range []string{"pool-scheduler", "pipeline-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var config string
	for _, o := range util.KustomizeBuild(t, "manifests/overlays/nodepool-labels-operator") {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "pool-scheduler-config-") {
			config, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
		if o.GetKind() == "Deployment" && o.GetName() == "pool-labeler" {
			t.Fatal("the overlay runs pool-labeler beside the operator")
		}
	}
	labels := util.BanzaiLabels("pool1")
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pipeline-system", "pool1", labels))
	util.CreateNode(tCtx, t, cs, util.Node("aks-general-12345678-vmss000000", map[string]string{util.AgentPoolKey: "general"}).Obj())
	proc := util.StartSchedulerBinary(t, util.ConfigDocFor(t, cp, []byte(config)))
	util.WaitForLeaseHolder(tCtx, t, cs, "pool-scheduler", "pool-scheduler", "", 60*time.Second)

	ns := util.CreateNamespace(tCtx, t, cs, "shop")
	want := map[string]string{}
	for k, v := range labels {
		if k != "nodepool.banzaicloud.io/name" { // a pool-identity label: not required
			want[k] = v
		}
	}
	r := util.JoinRace(tCtx, t, cp, ns, "pool1", 2, want, func(node string) { util.OperatorLabels(tCtx, t, cp, node, labels) })
	if len(r.Early) > 0 {
		t.Errorf("pods bound to nodes before the operator labelled them: %q", r.Early)
	}
	t.Logf("pool1 (sets in pipeline-system, labelled by the operator): %s", r)
	// The overlay's RBAC is the base's (manifests/scheduler): TestLeastPrivilege runs the binary
	// with its ServiceAccount. Here it runs as admin; what it must say is that it judged pool1.
	if !strings.Contains(proc.Output(), "labelSetNamespaces=[\"pipeline-system\"]") {
		t.Errorf("pool-scheduler did not read the overlay's labelSetNamespaces:\n%s", proc.Output())
	}
}
