package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	configv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// shippedLabeler is pool-labeler's controller as one install path ships it: its Deployment, the
// objects that give its ServiceAccount its rights (RBAC, admission policy), and the scheduler
// configuration its --config mounts.
type shippedLabeler struct {
	deployment *appsv1.Deployment
	access     []*unstructured.Unstructured
	config     []byte
}

// kustomizeLabeler is manifests/labeler/controller, reading manifests/scheduler/config.yaml.
func kustomizeLabeler(t *testing.T) shippedLabeler {
	t.Helper()
	var s shippedLabeler
	for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "labeler", "controller")) {
		if o.GetKind() == "Deployment" {
			s.deployment = &appsv1.Deployment{}
			fromUnstructured(t, o, s.deployment)
			continue
		}
		s.access = append(s.access, o)
	}
	data, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	s.config = data
	return s
}

// chartLabeler is the chart's labeler controller rendered with values, reading the chart's
// scheduler ConfigMap.
func chartLabeler(t *testing.T, values string) shippedLabeler {
	t.Helper()
	r, err := renderChart(t, chartNamespace, values)
	if err != nil {
		t.Fatal(err)
	}
	var s shippedLabeler
	for _, o := range r.objects {
		name := o.GetName()
		if !(name == "pool-labeler" || strings.HasPrefix(name, "pool-labeler:") || strings.HasPrefix(name, "pool-labeler-managed-labels")) {
			continue
		}
		switch o.GetKind() {
		case "Deployment":
			s.deployment = &appsv1.Deployment{}
			fromUnstructured(t, o, s.deployment)
		case "Service", "PodDisruptionBudget":
		default:
			s.access = append(s.access, o)
		}
	}
	cm := r.get(t, "ConfigMap", "pool-scheduler-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	s.config = []byte(data)
	if s.deployment == nil {
		t.Fatal("the chart rendered no Deployment pool-labeler")
	}
	return s
}

// options are the controller's options as its binary derives them from the Deployment's flags
// (the ones that decide what it lifts and where it reads sets; defaults for the others).
func (s shippedLabeler) options(t *testing.T) labeler.Options {
	t.Helper()
	f, schedulerName := labeler.Options{StartupTaintKey: pool.StartupTaintKey}, profile.DefaultSchedulerName
	for _, a := range s.deployment.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--startup-taint-key="); ok {
			f.StartupTaintKey = v
		}
		if v, ok := strings.CutPrefix(a, "--scheduler-name="); ok {
			schedulerName = v
		}
	}
	p, err := profile.Load("/etc/pool-scheduler/config.yaml", s.config, schedulerName)
	if err != nil {
		t.Fatalf("the shipped labeler's --config: %v", err)
	}
	f.Profile = p
	if err := f.Complete(); err != nil {
		t.Fatalf("the shipped labeler's flags: %v", err)
	}
	return f
}

// startDefaultScheduler runs kube-scheduler's default profile (default-scheduler, which places
// pool-scheduler's own pods) in process.
func startDefaultScheduler(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	var versioned configv1.KubeSchedulerConfiguration
	schedscheme.Scheme.Default(&versioned)
	var cfg schedconfig.KubeSchedulerConfiguration
	if err := schedscheme.Scheme.Convert(&versioned, &cfg, nil); err != nil {
		t.Fatal(err)
	}
	util.StartScheduler(t, cp, cfg.Profiles...)
}

// TestLabelerRunsWhereItsTaintIs (#56): `az aks update --node-init-taints` registers every node
// of every pool, the system pool's included, with the startup taint. The labeler's controller,
// as shipped (kustomize and chart), must still get a node: the default scheduler binds its pod
// to a tainted node of the system pool (its preferred affinity, its tolerations of
// CriticalAddonsOnly and of its own startup taint), and the labeler, running as that pod's
// ServiceAccount under its admission policy, then lifts the taint from every node of every pool
// with a NodePoolLabelSet. A system pool without a set keeps the taint (docs/gate.md: give it
// one). Fails if the shipped toleration of the startup taint goes: the pod stays pending.
func TestLabelerRunsWhereItsTaintIs(t *testing.T) {
	for _, tt := range []struct {
		name    string
		shipped func(t *testing.T) shippedLabeler
	}{
		{"kustomize", kustomizeLabeler},
		{"chart", func(t *testing.T) shippedLabeler { return chartLabeler(t, "") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			cp := util.StartControlPlane(t)
			cs := cp.Client
			const ns = "pool-scheduler"
			shipped := tt.shipped(t)
			ensureNamespace(tCtx, t, cp, ns)
			util.ApplyAccessObjects(tCtx, t, cp, shipped.access)
			opts := shipped.options(t)
			if opts.StartupTaintKey != pool.StartupTaintKey {
				t.Fatalf("the shipped labeler lifts %q, want %q", opts.StartupTaintKey, pool.StartupTaintKey)
			}

			// Every node registers with the startup taint (NoSchedule, as AKS node initialization
			// taints and docs/gate.md set it); the system pool also with AKS's CriticalAddonsOnly.
			const agentpool = "kubernetes.azure.com/agentpool"
			initTaint := v1.Taint{Key: pool.StartupTaintKey, Value: "true", Effect: v1.TaintEffectNoSchedule}
			critical := v1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectNoSchedule}
			system := []string{"aks-system-0", "aks-system-1"}
			user := []string{"aks-user-0", "aks-user-1", "aks-user-2"}
			for _, n := range system {
				util.CreateNode(tCtx, t, cs, util.Node(n, map[string]string{agentpool: "system", "kubernetes.azure.com/mode": "system", v1.LabelOSStable: "linux"}).
					Taints([]v1.Taint{critical, initTaint}).Obj())
			}
			for _, n := range user {
				util.CreateNode(tCtx, t, cs, util.Node(n, map[string]string{agentpool: "user", "kubernetes.azure.com/mode": "user", v1.LabelOSStable: "linux"}).
					Taints([]v1.Taint{initTaint}).Obj())
			}
			want := map[string]string{"example.com/tier": "gold"}
			util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "user", want))

			// The labeler's pod, from the shipped Deployment's template, placed by the default
			// scheduler.
			tmpl := shipped.deployment.Spec.Template
			pod := util.CreatePod(tCtx, t, cs, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-labeler-0", Labels: tmpl.Labels},
				Spec:       tmpl.Spec,
			})
			startDefaultScheduler(t, cp)
			var bound *v1.Pod
			err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				bound = p
				return p.Spec.NodeName != "", nil
			})
			if err != nil {
				var why []string
				for _, c := range bound.Status.Conditions {
					why = append(why, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
				}
				t.Fatalf("the labeler's pod was never bound (every node carries the startup taint): %v; conditions %v; tolerations %+v", err, why, tmpl.Spec.Tolerations)
			}
			node, err := cs.CoreV1().Nodes().Get(tCtx, bound.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if node.Labels[agentpool] != "system" || !hasTaint(node, pool.StartupTaintKey) {
				t.Errorf("the labeler's pod bound to %s (pool %s, taints %v), want a node of the system pool, still tainted", node.Name, node.Labels[agentpool], taintKeys(node))
			}

			// The labeler, as that pod's ServiceAccount (RBAC, admission policy), lifts the
			// taint from the pool with a set; the system pool, with none, keeps it.
			saCfg, _ := util.ServiceAccountConfig(tCtx, t, cp, ns, tmpl.Spec.ServiceAccountName, bound)
			util.StartLabelerAs(t, saCfg, opts)
			for _, n := range user {
				waitNodeCheck(tCtx, t, cs, n, "startup taint lifted, labels applied", func(n *v1.Node) bool {
					return !hasTaint(n, pool.StartupTaintKey) && carries(n, want)
				})
			}
			for _, n := range system {
				got, err := cs.CoreV1().Nodes().Get(tCtx, n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !hasTaint(got, pool.StartupTaintKey) {
					t.Errorf("%s: startup taint lifted from a node of a pool with no NodePoolLabelSet", n)
				}
			}

			// docs/gate.md's advice for --node-init-taints: a set for the system pool too (no
			// labels needed); then every node is released, CriticalAddonsOnly left in place.
			util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, "system", map[string]string{}))
			for _, n := range system {
				got := waitNodeCheck(tCtx, t, cs, n, "startup taint lifted from the system pool", func(n *v1.Node) bool {
					return !hasTaint(n, pool.StartupTaintKey)
				})
				if !hasTaint(got, critical.Key) {
					t.Errorf("%s: taints %v, want CriticalAddonsOnly kept", n, taintKeys(got))
				}
			}
		})
	}
}
