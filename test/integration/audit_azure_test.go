package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// twoStandardLoadBalancers is a cloud config (cloud-provider-azure's azure.json) with two
// Standard load balancers: "kubernetes", whose primary VM set is the system pool's scale set,
// and "lb-gpu" for a GPU pool scaled to zero. The user pool's nodes match no primary VM set and
// no nodeSelector, so cloud-provider-azure assigns them to "kubernetes"; "lb-gpu" gets no node.
const twoStandardLoadBalancers = `{
  "cloud": "AzurePublicCloud",
  "aadClientSecret": "not-read",
  "resourceGroup": "MC_rg_cluster_westeurope",
  "vmType": "vmss",
  "primaryScaleSetName": "aks-system-31415926-vmss",
  "loadBalancerSku": "Standard",
  "loadBalancerBackendPoolConfigurationType": "nodeIP",
  "multipleStandardLoadBalancerConfigurations": [
    {"name": "kubernetes", "primaryVMSet": "aks-system-31415926-vmss"},
    {"name": "lb-gpu", "primaryVMSet": "aks-gpu-31415926-vmss",
     "nodeSelector": {"matchLabels": {"kubernetes.azure.com/agentpool": "gpu"}}}
  ]
}`

// TestAuditMultipleStandardLoadBalancers reads a cluster of today's AKS node kinds with
// `poolctl audit --azure-cloud-config` holding two Standard load balancers:
//   - web (Local) is placed on "kubernetes", to which only system nodes are assigned, with its
//     pods on user nodes: no finding, as a Local Service gets a backend pool of its own nodes;
//     but 3 pods on one node and 1 on another get 1/6 and 1/2 of the traffic: uneven;
//   - edge (Local) has its pod on a node labelled exclude-from-external-load-balancers: no traffic;
//   - api (Cluster) may be placed on "lb-gpu", to which no node is assigned: cannot be told.
//
// Spreading web's pods 2 and 2 leaves the uneven finding out.
func TestAuditMultipleStandardLoadBalancers(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "shop")
	installShippedConfigMap(tCtx, t, cp)
	const prefix = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_rg_cluster_westeurope/providers/Microsoft.Compute/"
	scaleSetNode := func(pool string, i int, extra map[string]string) string {
		vmss := "aks-" + pool + "-31415926-vmss"
		name := fmt.Sprintf("%s%06d", vmss, i)
		labels := map[string]string{"kubernetes.azure.com/agentpool": pool, "kubernetes.azure.com/mode": "user", "topology.kubernetes.io/zone": "0"}
		if pool == "system" {
			labels["kubernetes.azure.com/mode"] = "system"
		}
		for k, v := range extra {
			labels[k] = v
		}
		node := util.Node(name, labels).Obj()
		node.Spec.ProviderID = fmt.Sprintf("%svirtualMachineScaleSets/%s/virtualMachines/%d", prefix, vmss, i)
		util.CreateNode(tCtx, t, cs, node)
		return name
	}
	scaleSetNode("system", 0, nil)
	user0 := scaleSetNode("user", 0, nil)
	user1 := scaleSetNode("user", 1, nil)
	excluded := scaleSetNode("user", 2, map[string]string{azurelb.ExcludeFromLoadBalancersLabel: "true"})
	// A Virtual Machines node pool: standalone VMs, in no VM set.
	vms := "aks-batch-31415926-vms1"
	vmsNode := util.Node(vms, map[string]string{"kubernetes.azure.com/agentpool": "batch", "kubernetes.azure.com/mode": "user", "topology.kubernetes.io/zone": "0"}).Obj()
	vmsNode.Spec.ProviderID = prefix + "virtualMachines/" + vms
	util.CreateNode(tCtx, t, cs, vmsNode)

	pod := func(app, name, node string) {
		util.CreatePod(tCtx, t, cs, util.Pod(ns, name).Node(node).Labels(map[string]string{"app": app}).Obj())
	}
	pod("web", "web-a", user0)
	pod("web", "web-b", user0)
	pod("web", "web-c", user0)
	pod("web", "web-d", user1)
	pod("edge", "edge-a", excluded)
	pod("api", "api-a", vms)
	service := func(name string, policy v1.ServiceExternalTrafficPolicy, annotations map[string]string) {
		if _, err := cs.CoreV1().Services(ns).Create(tCtx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy,
				Selector: map[string]string{"app": name}, Ports: []v1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	service("web", v1.ServiceExternalTrafficPolicyLocal, map[string]string{azurelb.AzureLoadBalancerConfigurationsAnnotation: "kubernetes"})
	service("edge", v1.ServiceExternalTrafficPolicyLocal, nil)
	service("api", v1.ServiceExternalTrafficPolicyCluster, nil)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	cloudConfig := filepath.Join(dir, "azure.json")
	if err := os.WriteFile(cloudConfig, []byte(twoStandardLoadBalancers), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"audit", "--kubeconfig", kubeconfig, "--azure-cloud-config", cloudConfig, "-n", ns, "--max-findings", "100"}
	audit := func() (report.Report, string) {
		t.Helper()
		stdout, stderr, err := runPoolctl(t, append(args, "-o", "json")...)
		if err != nil {
			t.Fatalf("audit: %v\n%s", err, stderr)
		}
		var got report.Report
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("audit -o json is not JSON: %v\n%s", err, stdout)
		}
		table, _, err := runPoolctl(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		return got, table
	}
	objects := func(findings []report.Finding) []string {
		var out []string
		for _, f := range findings {
			out = append(out, strings.TrimPrefix(f.Object, ns+"/")+"@"+f.Node)
		}
		return out
	}

	got, table := audit()
	for _, c := range []struct {
		what     string
		findings []report.Finding
		want     string
	}{
		// edge's Local pool is its endpoints' nodes, the excluded one included
		// (checkAndApplyLocalServiceBackendPoolUpdates puts it back): no finding.
		{"no traffic", got.LoadBalancerMismatches, ""},
		{"uneven", got.LoadBalancerUnevenTraffic, "web@"},
		{"cannot be told", got.LoadBalancerUndetermined, "api@"},
	} {
		if g := strings.Join(objects(c.findings), " "); g != c.want {
			t.Errorf("%s: %q, want %q: %+v", c.what, g, c.want, c.findings)
		}
	}
	if f := got.LoadBalancerUnevenTraffic; len(f) == 1 && !strings.Contains(f[0].Detail, "each pod on "+user1+" (1 there) gets 50.0%, each pod on "+user0+" (3 there) 16.7%") {
		t.Errorf("uneven detail: %s", f[0].Detail)
	}
	if f := got.LoadBalancerUndetermined; len(f) == 1 && !strings.Contains(f[0].Detail, "on one of kubernetes, lb-gpu") {
		t.Errorf("undetermined detail: %s", f[0].Detail)
	}
	if got.NumFindings() != 1 {
		t.Errorf("%d findings, want the uneven Service: %+v", got.NumFindings(), got)
	}
	for _, want := range []string{"PODS GET UNEVEN TRAFFIC", "fix: spread the pods over nodes", "CANNOT BE TOLD", "TOTAL FINDINGS: 1"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "not-read") {
		t.Error("the table quotes the cloud config's credentials")
	}

	// The fix: web's pods spread 2 and 2.
	if err := cs.CoreV1().Pods(ns).Delete(tCtx, "web-c", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	pod("web", "web-e", user1)
	got, table = audit()
	if len(got.LoadBalancerUnevenTraffic) != 0 || got.NumFindings() != 0 {
		t.Errorf("after spreading: uneven %+v, %d findings\n%s", got.LoadBalancerUnevenTraffic, got.NumFindings(), table)
	}
}
