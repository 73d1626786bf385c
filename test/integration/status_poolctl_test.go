package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/poolctl"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestPoolctlStatus: `poolctl status` judges every node with NodePoolReady's rule and the args of
// the deployed scheduler configuration, read from the scheduler's ConfigMap in the cluster (here
// with a kustomize-generated name) or from --config, never from poolctl's own defaults: with
// the shipped configuration only the release namespace's NodePoolLabelSets count, with a
// cluster-wide one the other namespace's set puts the pool in conflict. Without a ConfigMap it
// says what to pass.
func TestPoolctlStatus(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ensureNamespace(tCtx, t, cp, "pool-scheduler")
	other := util.CreateNamespace(tCtx, t, cs, "other")
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "spot", map[string]string{"example.com/a": "1"}))
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(other, "spot", map[string]string{"example.com/a": "2"}))
	shippedConfig, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	util.InstallConfigMap(tCtx, t, cs, "pool-scheduler", "pool-scheduler-config-7g2f9k8h5m", map[string]string{"config.yaml": string(shippedConfig)})

	util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot"}).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("spot-1", map[string]string{poolKey: "spot", "example.com/a": "1"}).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("spot-2", map[string]string{poolKey: "spot", "example.com/a": "3"}).Obj())
	util.CreateNode(tCtx, t, cs, util.Node("stray-0", nil).Obj())
	util.CreatePod(tCtx, t, cs, util.Pod(podNS, "waiting").Obj()) // schedulerName pool-scheduler
	util.CreatePod(tCtx, t, cs, util.Pod(podNS, "someone-elses").SchedulerName(v1.DefaultSchedulerName).Obj())

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) poolctl.Status {
		t.Helper()
		return statusJSON(t, kubeconfig, args...)
	}

	t.Run("the deployed ConfigMap: the release namespace's sets", func(t *testing.T) {
		s := run(t)
		if !strings.HasPrefix(s.Config, "ConfigMap pool-scheduler/pool-scheduler-config-7g2f9k8h5m") || !slices.Equal(s.LabelSetNamespaces, []string{"pool-scheduler"}) {
			t.Errorf("judged by %q, sets of %q; want the ConfigMap and namespace pool-scheduler", s.Config, s.LabelSetNamespaces)
		}
		// The other namespace's set is not read, and says so.
		if len(s.LabelSetMismatches) != 1 || s.LabelSetMismatches[0].Object != "NodePoolLabelSet "+other+"/spot" ||
			!strings.Contains(s.LabelSetMismatches[0].Detail, "judged by its sets in pool-scheduler/spot only") {
			t.Errorf("label-set mismatches %+v, want one for %s/spot", s.LabelSetMismatches, other)
		}
		want := []poolctl.PoolStatus{
			{Pool: "", Nodes: 1, Held: 1, HeldByReason: map[string]int{"UnknownPool": 1}},
			{Pool: "spot", Nodes: 3, Ready: 1, Held: 2, HeldByReason: map[string]int{"MissingLabel": 1, "WrongValue": 1}},
		}
		if diff := cmp.Diff(want, s.Pools); diff != "" {
			t.Errorf("pools (-want +got):\n%s", diff)
		}
		wantHeld := []poolctl.HeldNodeStatus{
			{Node: "stray-0", Reason: "UnknownPool", Detail: "no pool label"},
			{Node: "spot-0", Pool: "spot", Reason: "MissingLabel", Detail: "label example.com/a=1 missing"},
			{Node: "spot-2", Pool: "spot", Reason: "WrongValue", Detail: `label example.com/a is "3", want "1"`},
		}
		if diff := cmp.Diff(wantHeld, s.HeldNodes); diff != "" {
			t.Errorf("held nodes (-want +got):\n%s", diff)
		}
		if s.PodsWaiting != 1 || len(s.WaitingPods) != 1 || s.WaitingPods[0].Pod != podNS+"/waiting" {
			t.Errorf("pods waiting %d %+v, want only %s/waiting (schedulerName pool-scheduler)", s.PodsWaiting, s.WaitingPods, podNS)
		}
	})

	t.Run("a cluster-wide configuration file: the other namespace's set conflicts", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "config.yaml")
		wide := strings.Replace(string(shippedConfig), "labelSetNamespaces: [pool-scheduler]", `labelSetNamespaces: []`, 1)
		if err := os.WriteFile(path, []byte(wide), 0o600); err != nil {
			t.Fatal(err)
		}
		s := run(t, "--config", path)
		want := poolctl.PoolStatus{Pool: "spot", Nodes: 3, Ready: 1, Held: 2, HeldByReason: map[string]int{"LabelSetConflict": 2}}
		if diff := cmp.Diff(want, s.Pools[1]); diff != "" || len(s.LabelSetNamespaces) != 0 || len(s.LabelSetMismatches) != 0 {
			t.Errorf("spot with every namespace's sets (-want +got):\n%s (namespaces %q, mismatches %+v)", diff, s.LabelSetNamespaces, s.LabelSetMismatches)
		}
	})

	t.Run("the table", func(t *testing.T) {
		table, _, err := runPoolctl(t, "status", "--kubeconfig", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"NodePoolLabelSets of pool-scheduler", "spot", "MissingLabel=1 WrongValue=1", "(no pool)", "PODS WAITING: 1", "LABEL SETS NOT READ", other + "/spot"} {
			if !strings.Contains(table, want) {
				t.Errorf("table lacks %q:\n%s", want, table)
			}
		}
	})

	t.Run("no ConfigMap: an error that says what to pass, not poolctl's defaults", func(t *testing.T) {
		if err := cs.CoreV1().ConfigMaps("pool-scheduler").Delete(tCtx, "pool-scheduler-config-7g2f9k8h5m", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"status", "audit"} {
			_, _, err := runPoolctl(t, cmd, "--kubeconfig", kubeconfig)
			if err == nil || !strings.Contains(err.Error(), "--config") || !strings.Contains(err.Error(), "pool-scheduler/pool-scheduler-config") {
				t.Errorf("%s without the ConfigMap: %v, want an error naming it and --config", cmd, err)
			}
		}
	})
}

// TestPoolctlStatusScheduler: `poolctl status` says whether pool-scheduler runs as the webhook's
// hand-off judges it: the Lease of the deployed configuration's leaderElection, renewed within
// its lease duration.
func TestPoolctlStatusScheduler(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	installShippedConfigMap(tCtx, t, cp)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T) poolctl.SchedulerStatus {
		t.Helper()
		stdout, stderr, err := runPoolctl(t, "status", "--kubeconfig", kubeconfig, "-o", "json")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, stderr)
		}
		var s poolctl.Status
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatal(err)
		}
		return s.Scheduler
	}
	if st := run(t); st.Healthy || !strings.Contains(st.Reason, "no Lease pool-scheduler/pool-scheduler") || st.APIServer == "" {
		t.Errorf("before pool-scheduler ran: %+v, want not healthy for want of the Lease, and the API server's version", st)
	}
	renewed := func(ago time.Duration) *coordinationv1.Lease {
		at := metav1.NewMicroTime(time.Now().Add(-ago))
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: "pool-scheduler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("scheduler-0"), RenewTime: &at}}
	}
	lease, err := cp.Client.CoordinationV1().Leases("pool-scheduler").Create(tCtx, renewed(time.Minute), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := run(t); st.Healthy || st.Leader != "scheduler-0" || !strings.Contains(st.Reason, "has not renewed the Lease") {
		t.Errorf("a leader gone for a minute: %+v, want not healthy", st)
	}
	fresh := renewed(0)
	fresh.ResourceVersion = lease.ResourceVersion
	if _, err := cp.Client.CoordinationV1().Leases("pool-scheduler").Update(tCtx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := run(t); !st.Healthy || st.Leader != "scheduler-0" || st.LeaseAgeSeconds == nil || st.Switch != "" {
		t.Errorf("a leader renewing: %+v, want healthy, and no switch (none installed)", st)
	}
	// The hand-off controller's switch, as it writes it while pool-scheduler is down.
	if _, err := cp.Client.CoreV1().ConfigMaps("pool-scheduler").Create(tCtx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: handoff.SwitchConfigMap},
		Data:       map[string]string{handoff.SwitchKey: "false", handoff.SwitchReasonKey: "no healthy leader"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := run(t); st.Switch != "false" || st.SwitchReason != "no healthy leader" {
		t.Errorf("switch off: %+v, want it reported with its reason", st)
	}
	stdout, _, err := runPoolctl(t, "status", "--kubeconfig", kubeconfig)
	if err != nil || !strings.Contains(stdout, "Hand-off switch (the MutatingAdmissionPolicy's): off (no healthy leader)") {
		t.Errorf("status table lacks the switch (%v):\n%s", err, stdout)
	}
}

// statusJSON runs `poolctl status -o json` against kubeconfig and decodes its output.
func statusJSON(t *testing.T, kubeconfig string, args ...string) poolctl.Status {
	t.Helper()
	stdout, stderr, err := runPoolctl(t, append([]string{"status", "--kubeconfig", kubeconfig, "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, stderr)
	}
	var s poolctl.Status
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("status -o json is not JSON: %v\n%s", err, stdout)
	}
	return s
}
