package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/poolctl"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestPoolctlStartupTaint (#46): `poolctl status` lists the pools whose nodes carry the startup
// taint and, past --startup-taint-after, each such node with why pool-labeler has not lifted
// it, by the labeler's own rule: no pool label, no set of the pool in view (one in a namespace
// not read named), labels not applied (the gate's reason), or pool-labeler's controller not
// running (judged by its Lease) or not lifting that key. `poolctl audit` counts them as findings.
func TestPoolctlStartupTaint(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	installShippedConfigMap(tCtx, t, cp)
	other := util.CreateNamespace(tCtx, t, cs, "other")
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "spot", map[string]string{"example.com/a": "1"}))
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(other, "gpu", map[string]string{"example.com/a": "1"}))
	tainted := []v1.Taint{startupTaint}
	util.CreateNode(tCtx, t, cs, util.Node("spot-held", map[string]string{poolKey: "spot"}).Taints(tainted).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("spot-ready", map[string]string{poolKey: "spot", "example.com/a": "1"}).Taints(tainted).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("spot-lifted", map[string]string{poolKey: "spot", "example.com/a": "1"}).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("bare-0", map[string]string{poolKey: "bare"}).Taints(tainted).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("gpu-0", map[string]string{poolKey: "gpu"}).Taints(tainted).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("stray-0", nil).Taints(tainted).Obj())

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	status := func(t *testing.T, args ...string) poolctl.StartupTaintStatus {
		t.Helper()
		return statusJSON(t, kubeconfig, args...).StartupTaint
	}
	// reasons maps each long-tainted node to the part of its detail after the age.
	reasons := func(st poolctl.StartupTaintStatus) map[string]string {
		out := map[string]string{}
		for _, f := range st.Long {
			_, why, _ := strings.Cut(f.Detail, "): ")
			out[f.Node] = why
		}
		return out
	}
	notApplied := "labels not applied (MissingLabel): label example.com/a=1 missing"
	noSet := "pool bare has no NodePoolLabelSet in view: pool-labeler lifts the taint only once a set of the pool says what its labels are"
	unread := "pool gpu has no NodePoolLabelSet in view: pool-labeler lifts the taint only once a set of the pool says what its labels are (" + other + "/gpu is in a namespace not read)"
	noPool := "no pool label: pool-labeler lifts the taint only from nodes of a pool with a NodePoolLabelSet"

	t.Run("the pools that use it; none tainted long by the default threshold", func(t *testing.T) {
		st := status(t)
		want := []report.StartupTaintPool{{Pool: "", Nodes: 1, Tainted: 1}, {Pool: "bare", Nodes: 1, Tainted: 1}, {Pool: "gpu", Nodes: 1, Tainted: 1}, {Pool: "spot", Nodes: 3, Tainted: 2}}
		if diff := cmp.Diff(want, st.Pools); diff != "" {
			t.Errorf("pools (-want +got):\n%s", diff)
		}
		if st.Key != startupTaint.Key || st.AfterSeconds != report.DefaultStartupTaintAfter.Seconds() || len(st.Long) != 0 {
			t.Errorf("key %q, after %vs, long %+v; want the default key, 600s and none (the nodes joined seconds ago)", st.Key, st.AfterSeconds, st.Long)
		}
	})

	t.Run("labeler not running", func(t *testing.T) {
		st := status(t, "--startup-taint-after", "1ns")
		notRunning := "pool-labeler's controller is not running: no Lease pool-scheduler/pool-labeler (--labeler-lease): pool-labeler's controller has not run here"
		want := map[string]string{
			"bare-0": noSet, "gpu-0": unread, "stray-0": noPool,
			"spot-held":  notRunning + "; the node's labels are not applied (MissingLabel: label example.com/a=1 missing)",
			"spot-ready": notRunning,
		}
		if diff := cmp.Diff(want, reasons(st)); diff != "" {
			t.Errorf("why each node is still tainted (-want +got):\n%s", diff)
		}
	})

	t.Run("labeler running", func(t *testing.T) {
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: "pool-labeler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pool-labeler-0"), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}}
		if _, err := cs.CoordinationV1().Leases("pool-scheduler").Create(tCtx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		st := status(t, "--startup-taint-after", "1ns")
		want := map[string]string{
			"bare-0": noSet, "gpu-0": unread, "stray-0": noPool, "spot-held": notApplied,
			"spot-ready": "the labels are applied and pool-labeler runs, but the taint is still there: its --startup-taint-key is another key, or it cannot patch the node",
		}
		if diff := cmp.Diff(want, reasons(st)); diff != "" {
			t.Errorf("why each node is still tainted (-want +got):\n%s", diff)
		}
		if !st.Labeler.Running {
			t.Errorf("labeler %+v, want running (Lease renewed now)", st.Labeler)
		}

		table, _, err := runPoolctl(t, "status", "--kubeconfig", kubeconfig, "--startup-taint-after", "1ns")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"STARTUP TAINT " + startupTaint.Key, "TAINTED LONGER THAN 1ns: 5", "spot-held", notApplied} {
			if !strings.Contains(table, want) {
				t.Errorf("table lacks %q:\n%s", want, table)
			}
		}

		stdout, stderr, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "-o", "json", "--startup-taint-after", "1ns", "--max-findings", "100")
		if err != nil {
			t.Fatalf("audit: %v\n%s", err, stderr)
		}
		var r report.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range r.StartupTaintLong {
			_, why, _ := strings.Cut(f.Detail, "): ")
			got[f.Node] = why
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("audit's startup-taint findings (-want +got):\n%s", diff)
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		for _, tt := range []struct{ args, want string }{
			{"--startup-taint-after=0s", "--startup-taint-after must be positive"},
			{"--labeler-lease=pool-labeler", `--labeler-lease: "pool-labeler" is not NAMESPACE/NAME`},
			{"--startup-taint-key=", "--startup-taint-key must not be empty"},
		} {
			for _, cmd := range []string{"status", "audit"} {
				_, _, err := runPoolctl(t, cmd, "--kubeconfig", kubeconfig, tt.args)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s %s: %v, want %q", cmd, tt.args, err, tt.want)
				}
			}
		}
	})
}
