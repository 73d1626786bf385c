package integration

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/poolctl"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// operatorNS is where Banzai Pipeline's nodepool-labels-operator keeps its NodePoolLabelSets.
const operatorNS = "pipeline-system"

// install is pool-scheduler as one install path renders it: the scheduler's configuration file
// and whether pool-labeler's controller runs.
type install struct {
	config  []byte
	labeler bool
}

// chartInstall renders the chart into the release namespace pool-scheduler with values.
func chartInstall(t *testing.T, values string) install {
	t.Helper()
	r, err := renderChart(t, chartNamespace, values)
	if err != nil {
		t.Fatalf("rendering the chart with %s: %v", values, err)
	}
	cm := r.get(t, "ConfigMap", "pool-scheduler-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	in := install{config: []byte(data)}
	for _, o := range r.objects {
		in.labeler = in.labeler || (o.GetKind() == "Deployment" && o.GetName() == "pool-labeler")
	}
	return in
}

// kustomizeInstall builds a kustomization of manifests/ as `kubectl apply -k` does (generators
// and patches applied).
func kustomizeInstall(t *testing.T, dir string) install {
	t.Helper()
	objs := util.KustomizeBuild(t, dir)
	var in install
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "pool-scheduler-config-") {
			data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			in.config = []byte(data)
		}
		in.labeler = in.labeler || (o.GetKind() == "Deployment" && o.GetName() == "pool-labeler")
	}
	if in.config == nil {
		t.Fatalf("kustomize build %s: no pool-scheduler-config ConfigMap", dir)
	}
	return in
}

// start runs the install's scheduler (its configuration decoded as kube-scheduler decodes it)
// against cp.
func (in install) start(t *testing.T, cp *controlplane.ControlPlane) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, in.config, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(ktesting.Init(t).Logger(), path)
	if err != nil {
		t.Fatalf("decoding the installed scheduler configuration: %v\n%s", err, in.config)
	}
	util.StartScheduler(t, cp, cfg.Profiles...)
	return cfg
}

// startLabeler runs pool-labeler's controller with the options its binary derives from the
// install's configuration file (--scheduler-config), against cp.
func (in install) startLabeler(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	gate, namespaces, err := labeler.GateFromSchedulerConfig(in.config, "pool-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	util.StartLabeler(t, cp, labeler.Options{Gate: gate, Namespaces: namespaces})
}

// TestGateAsInstalled: the gate as the chart and kustomize install it, in the layouts users
// bring: (a) NodePoolLabelSets in the release namespace with pool-labeler, (b) in the
// nodepool-labels-operator's namespace with the operator's annotation format and no labeler of
// ours, (c) in both, pool-labeler applying both (the operator replaced). In each, pods created
// before their pool's nodes join land on no node before its labels, and all bind once they land.
func TestGateAsInstalled(t *testing.T) {
	releaseSet := map[string]string{"example.com/lifecycle": "spot", "example.com/team": "data"}
	type pool struct {
		name, namespace string
		labels          map[string]string
		// byOperator: the test labels the pool's nodes as the operator does; else pool-labeler.
		byOperator bool
	}
	layouts := []struct {
		name    string
		install func(t *testing.T) install
		pools   []pool
	}{{
		name:    "(a) chart defaults, sets in the release namespace, pool-labeler",
		install: func(t *testing.T) install { return chartInstall(t, `{}`) },
		pools:   []pool{{name: "spot", namespace: chartNamespace, labels: releaseSet}},
	}, {
		name:    "(a) kustomize manifests/, sets in the release namespace, pool-labeler",
		install: func(t *testing.T) install { return kustomizeInstall(t, "manifests") },
		pools:   []pool{{name: "spot", namespace: "pool-scheduler", labels: releaseSet}},
	}, {
		name: "(b) chart pointed at the operator's namespace, no labeler of ours",
		install: func(t *testing.T) install {
			return chartInstall(t, `{labelSets: {namespaces: [pipeline-system]}, labeler: {controller: {enabled: false}}}`)
		},
		pools: []pool{{name: "pool1", namespace: operatorNS, labels: util.BanzaiLabels("pool1"), byOperator: true}},
	}, {
		name:    "(b) kustomize overlay nodepool-labels-operator, no labeler of ours",
		install: func(t *testing.T) install { return kustomizeInstall(t, "manifests/overlays/nodepool-labels-operator") },
		pools:   []pool{{name: "pool1", namespace: operatorNS, labels: util.BanzaiLabels("pool1"), byOperator: true}},
	}, {
		name: "(c) chart reading both namespaces, pool-labeler applying both",
		install: func(t *testing.T) install {
			return chartInstall(t, `{labelSets: {namespaces: [pool-scheduler, pipeline-system]}}`)
		},
		pools: []pool{
			{name: "pool1", namespace: operatorNS, labels: util.BanzaiLabels("pool1")},
			{name: "spot", namespace: chartNamespace, labels: releaseSet},
		},
	}}
	for _, layout := range layouts {
		t.Run(layout.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			cp := util.StartControlPlane(t)
			ensureNamespace(tCtx, t, cp, chartNamespace)
			ensureNamespace(tCtx, t, cp, operatorNS)
			in := layout.install(t)
			for _, p := range layout.pools {
				if in.labeler == p.byOperator {
					t.Fatalf("the install runs pool-labeler: %v; the layout labels %s by the operator: %v", in.labeler, p.name, p.byOperator)
				}
				util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(p.namespace, p.name, p.labels))
			}
			in.start(t, cp)
			// The cluster has a pool already, without a set: the pods below are refused by
			// their node selector until their pool's nodes join.
			util.CreateNode(tCtx, t, cp.Client, util.Node("aks-general-12345678-vmss000000", map[string]string{util.AgentPoolKey: "general"}).Obj())
			podNS := util.CreateNamespace(tCtx, t, cp.Client, "shop")
			// pool-labeler starts once the first pool's nodes have joined, a second after them:
			// a gate that let pods through would have bound them by then.
			startLabeler := sync.OnceFunc(func() { in.startLabeler(t, cp) })
			for _, p := range layout.pools {
				label := func(string) { startLabeler() }
				if p.byOperator {
					label = func(node string) { util.OperatorLabels(tCtx, t, cp, node, p.labels) }
				}
				want := maps.Clone(p.labels)
				delete(want, "nodepool.banzaicloud.io/name") // a pool-identity label: never written by pool-labeler
				r := util.JoinRace(tCtx, t, cp, podNS, p.name, 2, want, label)
				if len(r.Early) > 0 {
					t.Errorf("pool %s: pods bound to nodes before their labels: %q", p.name, r.Early)
				}
				t.Logf("pool %s (sets in %s): %s", p.name, p.namespace, r)
			}
		})
	}
}

// TestGateMisconfiguredNamespace is the field report's install: the nodepool-labels-operator
// keeps its sets in pipeline-system and labels nodes, pool-scheduler is installed with the
// chart's defaults (it reads the release namespace). The gate neither holds the operator's
// labelled nodes as stale nor frees a new unlabelled node of a labelled pool: it holds it, says
// why, and the mismatch is reported (events, metrics, poolctl status and audit).
func TestGateMisconfiguredNamespace(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ensureNamespace(tCtx, t, cp, chartNamespace)
	ensureNamespace(tCtx, t, cp, operatorNS)
	in := chartInstall(t, `{labeler: {controller: {enabled: false}}}`)
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(operatorNS, "pool1", util.BanzaiLabels("pool1")))
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(operatorNS, "pool9", util.BanzaiLabels("pool9")))
	// A node the operator labelled before pool-scheduler was installed.
	labelledNode := util.Node("aks-pool1-12345678-vmss000000", map[string]string{util.AgentPoolKey: "pool1"}).Obj()
	util.CreateNode(tCtx, t, cs, labelledNode)
	util.OperatorLabels(tCtx, t, cp, labelledNode.Name, util.BanzaiLabels("pool1"))
	in.start(t, cp)
	podNS := util.CreateNamespace(tCtx, t, cs, "shop")
	pin := func(name, node string) {
		util.CreatePod(tCtx, t, cs, util.Pod(podNS, name).NodeSelector(map[string]string{v1.LabelHostname: node}).Obj())
	}

	t.Run("a node the operator labelled is used, not held as stale", func(t *testing.T) {
		pin("on-labelled", labelledNode.Name)
		util.WaitForPodBound(tCtx, t, cs, podNS, "on-labelled", bindTimeout)
	})

	t.Run("a new node of the labelled pool is held until labelled, and the pod says why", func(t *testing.T) {
		node := "aks-pool1-12345678-vmss000001"
		util.CreateNode(tCtx, t, cs, util.Node(node, map[string]string{util.AgentPoolKey: "pool1"}).Obj())
		pin("on-new", node)
		msg := util.WaitForPodUnschedulable(tCtx, t, cs, podNS, "on-new", pool.LabelSetNotVisible.String(), bindTimeout)
		if !strings.Contains(msg, "labelSetNamespaces") {
			t.Errorf("unschedulable message %q does not name the cause", msg)
		}
		util.OperatorLabels(tCtx, t, cp, node, util.BanzaiLabels("pool1"))
		util.WaitForPodBound(tCtx, t, cs, podNS, "on-new", bindTimeout)
	})

	t.Run("events name the namespaces", func(t *testing.T) {
		waitForEvent(tCtx, t, cp, operatorNS, nodepoolready.ReasonLabelSetNotRead, "pool9", "pipeline-system")
		waitForEvent(tCtx, t, cp, metav1.NamespaceDefault, nodepoolready.ReasonLabelSetNotVisible, "pool1", "labelSetNamespaces: pool-scheduler")
	})

	// #46: a set in the unread namespace holds its pool from the pool's first node, before any
	// node of it was labelled (a GPU pool scaled up from zero), and the pod says where the set is
	// and the command that reads it.
	t.Run("the first node of a pool whose set is not read is held, and the pod says the fix", func(t *testing.T) {
		node := "aks-pool9-12345678-vmss000000"
		util.CreateNode(tCtx, t, cs, util.Node(node, map[string]string{util.AgentPoolKey: "pool9"}).Obj())
		pin("on-first", node)
		// The pod's message is the cause's fixed text (messages aggregate over nodes); the
		// set's event names the namespace and the command.
		util.WaitForPodUnschedulable(tCtx, t, cs, podNS, "on-first", pool.LabelSetNotVisible.String(), bindTimeout)
		waitForEvent(tCtx, t, cp, operatorNS, nodepoolready.ReasonLabelSetNotRead, "pool9", "nodes of pool pool9 are held until a labeler labels them",
			"helm upgrade pool-scheduler manifests/charts/pool-scheduler -n pool-scheduler --reuse-values --set 'labelSets.namespaces={pool-scheduler,pipeline-system}'")
		util.OperatorLabels(tCtx, t, cp, node, util.BanzaiLabels("pool9"))
		util.WaitForPodBound(tCtx, t, cs, podNS, "on-first", bindTimeout)
		// Out of the way of the findings below, which count labelled pools.
		if err := cs.CoreV1().Pods(podNS).Delete(tCtx, "on-first", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Nodes().Delete(tCtx, node, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("poolctl status and audit name the sets, the pool and the fix", func(t *testing.T) {
		// The chart's ConfigMap, as poolctl finds it in the cluster.
		util.InstallConfigMap(tCtx, t, cs, chartNamespace, "pool-scheduler-config", map[string]string{"config.yaml": string(in.config)})
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
			t.Fatal(err)
		}
		// A new node of pool1 the operator has not labelled yet, held meanwhile.
		util.CreateNode(tCtx, t, cs, util.Node("aks-pool1-12345678-vmss000002", map[string]string{util.AgentPoolKey: "pool1"}).Obj())
		stdout, stderr, err := runPoolctl(t, "status", "--kubeconfig", kubeconfig, "-o", "json")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, stderr)
		}
		var s poolctl.Status
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatal(err)
		}
		var objects []string
		for _, f := range s.LabelSetMismatches {
			objects = append(objects, f.Object)
			if !strings.Contains(f.Fix, "labelSets.namespaces={pipeline-system,pool-scheduler}") {
				t.Errorf("%s: fix %q does not say how to read %s", f.Object, f.Fix, operatorNS)
			}
		}
		if diff := cmp.Diff([]string{"NodePoolLabelSet pipeline-system/pool1", "NodePoolLabelSet pipeline-system/pool9", "pool pool1"}, objects); diff != "" {
			t.Errorf("status label-set findings (-want +got):\n%s", diff)
		}
		held := map[string]string{}
		for _, h := range s.HeldNodes {
			held[h.Node] = h.Reason
		}
		if diff := cmp.Diff(map[string]string{"aks-pool1-12345678-vmss000002": "LabelSetNotVisible"}, held); diff != "" {
			t.Errorf("held nodes (-want +got):\n%s", diff)
		}
		// The mismatch is a finding: audit fails a pipeline that gates on it (--max-findings 0).
		table, _, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig)
		if err == nil || !strings.Contains(err.Error(), "findings exceed the threshold") {
			t.Errorf("audit: %v, want the findings to fail it", err)
		}
		for _, want := range []string{"NODEPOOLLABELSETS THE SCHEDULER DOES NOT READ", "pipeline-system/pool9", "pool pool1", "labelSetNamespaces: pool-scheduler"} {
			if !strings.Contains(table, want) {
				t.Errorf("audit lacks %q:\n%s", want, table)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, bindTimeout, true, func(context.Context) (bool, error) {
			unread := labelledGauge(t, "pool_scheduler_nodepoolready_unread_labelsets", "namespace", operatorNS)
			notVisible, _ := gaugeValue(t, "pool_scheduler_nodepoolready_pools_labelset_not_visible")
			return unread == 2 && notVisible == 1, nil
		})
		if err != nil {
			t.Errorf("unread sets in %s and pools not visible: %v, %v", operatorNS,
				labelledGauge(t, "pool_scheduler_nodepoolready_unread_labelsets", "namespace", operatorNS),
				func() float64 {
					v, _ := gaugeValue(t, "pool_scheduler_nodepoolready_pools_labelset_not_visible")
					return v
				}())
		}
	})
}

// waitForEvent waits for an event of reason in namespace whose note contains every part.
func waitForEvent(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, namespace, reason string, parts ...string) {
	t.Helper()
	var notes []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		notes = notes[:0]
		for _, e := range list.Items {
			if e.Reason != reason || e.Type != v1.EventTypeWarning {
				continue
			}
			notes = append(notes, e.Note)
			all := true
			for _, p := range parts {
				all = all && strings.Contains(e.Note, p)
			}
			if all {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning event %s in %s naming %q; saw %q", reason, namespace, parts, notes)
	}
}

// labelledGauge is the value of the gauge name's series with label=value (0 if absent).
func labelledGauge(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestOperatorOverlayIsTheShippedConfig: the kustomize overlay for clusters that keep the
// nodepool-labels-operator ships the scheduler's configuration with one change, the label-set
// namespace, so it cannot drift from manifests/scheduler/config.yaml.
func TestOperatorOverlayIsTheShippedConfig(t *testing.T) {
	overlay := kustomizeInstall(t, "manifests/overlays/nodepool-labels-operator")
	if overlay.labeler {
		t.Error("the overlay runs pool-labeler's controller beside the operator")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, overlay.config, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := options.LoadConfigFromFile(ktesting.Init(t).Logger(), path)
	if err != nil {
		t.Fatal(err)
	}
	args := util.PluginArgs(t, &got.Profiles[0], nodepoolready.Name).(*config.NodePoolReadyArgs)
	if diff := cmp.Diff([]string{operatorNS}, args.LabelSetNamespaces); diff != "" {
		t.Errorf("overlay labelSetNamespaces (-want +got):\n%s", diff)
	}
	args.LabelSetNamespaces = []string{chartNamespace}
	if diff := cmp.Diff(util.LoadShippedConfigAsShipped(t), got); diff != "" {
		t.Errorf("the overlay's configuration differs from the shipped one beyond labelSetNamespaces (-shipped +overlay):\n%s", diff)
	}
}
