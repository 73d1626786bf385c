package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/test/utils/ktesting"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/poolctl"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestPoolctlSpreadDomains: `poolctl status` and `poolctl audit` report, per pool, each spread
// dimension's distinct values, on today's AKS node kinds labelled as cloud-provider-azure and
// pool-labeler label them (docs/azure.md): a non-zonal Uniform scale set of fault-domain count 1
// (zone "0" on every node: not spread over zones), a Virtual Machines node pool (zone and update
// domain "0": neither spread), and a scale set over three zones (spread over both).
func TestPoolctlSpreadDomains(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	installShippedConfigMap(tCtx, t, cp)
	const rg = "azure:///subscriptions/0000/resourceGroups/mc_shop_aks_westeurope/providers/Microsoft.Compute/"
	node := func(name, pool, providerID string, labels map[string]string) {
		labels[util.AgentPoolKey] = pool
		n := util.Node(name, labels).Obj()
		n.Spec.ProviderID = providerID
		util.CreateNode(tCtx, t, cs, n)
	}
	for i := range 4 {
		vmss := "aks-userpool-27255451-vmss"
		node(fmt.Sprintf("%s%06d", vmss, i), "userpool", fmt.Sprintf("%svirtualMachineScaleSets/%s/virtualMachines/%d", rg, vmss, i),
			map[string]string{v1.LabelTopologyZone: "0", configv1.FaultDomainLabelKey: "0", configv1.UpdateDomainLabelKey: fmt.Sprint(i % 2)})
		name := fmt.Sprintf("aks-vmpool-27255451-vms%d", i)
		node(name, "vmpool", rg+"virtualMachines/"+name,
			map[string]string{v1.LabelTopologyZone: "0", configv1.FaultDomainLabelKey: "0", configv1.UpdateDomainLabelKey: "0"})
		zonal := "aks-zonal-27255451-vmss"
		node(fmt.Sprintf("%s%06d", zonal, i), "zonal", fmt.Sprintf("%svirtualMachineScaleSets/%s/virtualMachines/%d", rg, zonal, i),
			map[string]string{v1.LabelTopologyZone: fmt.Sprintf("westeurope-%d", i%3+1), configv1.UpdateDomainLabelKey: fmt.Sprint(i % 2)})
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	wantDistinct := map[string][]int{"userpool": {1, 2, 4}, "vmpool": {1, 1, 4}, "zonal": {3, 2, 4}}
	wantDegenerate := []string{
		`zone: 1 value in pool userpool ("0" on 4 of 4 nodes via topology.kubernetes.io/zone): not spread`,
		`zone: 1 value in pool vmpool ("0" on 4 of 4 nodes via topology.kubernetes.io/zone): not spread`,
		`update-domain: 1 value in pool vmpool ("0" on 4 of 4 nodes via topology.pool-scheduler.io/update-domain): not spread`,
	}
	check := func(t *testing.T, pools []report.PoolDomains, degenerate []report.Finding) {
		t.Helper()
		got := map[string][]int{}
		for _, p := range pools {
			for _, d := range p.Dimensions {
				got[p.Pool] = append(got[p.Pool], d.Distinct)
			}
		}
		if diff := cmp.Diff(wantDistinct, got); diff != "" {
			t.Errorf("distinct zone / update-domain / host per pool (-want +got):\n%s", diff)
		}
		var details []string
		for _, f := range degenerate {
			details = append(details, f.Detail)
		}
		if diff := cmp.Diff(wantDegenerate, details); diff != "" {
			t.Errorf("dimensions that cannot spread (-want +got):\n%s", diff)
		}
	}

	t.Run("status", func(t *testing.T) {
		stdout, stderr, err := runPoolctl(t, "status", "--kubeconfig", kubeconfig, "-o", "json")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, stderr)
		}
		var s poolctl.Status
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, stdout)
		}
		check(t, s.Domains, s.DegenerateDomains)
	})
	t.Run("audit", func(t *testing.T) {
		stdout, stderr, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "-o", "json")
		if err != nil {
			t.Fatalf("audit: %v\n%s", err, stderr)
		}
		var r report.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("audit -o json: %v\n%s", err, stdout)
		}
		check(t, r.Domains, r.DegenerateDomains)
		if r.NumFindings() != 0 {
			t.Errorf("%d findings, want 0: a dimension that cannot spread is a fact, not counted", r.NumFindings())
		}
	})
	t.Run("the tables", func(t *testing.T) {
		for _, cmd := range []string{"status", "audit"} {
			table, _, err := runPoolctl(t, cmd, "--kubeconfig", kubeconfig)
			if err != nil {
				t.Fatalf("%s: %v", cmd, err)
			}
			for _, want := range append([]string{"UPDATE-DOMAIN", "1 (0): not spread", "3 (westeurope-1,westeurope-2,westeurope-3)", "fix: on Azure a non-zonal node's zone label"}, wantDegenerate...) {
				if !strings.Contains(table, want) {
					t.Errorf("%s table lacks %q:\n%s", cmd, want, table)
				}
			}
		}
	})
}
