package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

// azureNode is a node of one of today's AKS node kinds, labelled as cloud-provider-azure and
// pool-labeler's domain mode label it (docs/azure.md, "What each node kind reports").
type azureNode struct {
	kind string // "vmss" (scale set), "vms" (Virtual Machines node pool), "as" (availability set, legacy)
	pool string
	i    int
	// zone is the zone label ("" none), fd pool-labeler's fault-domain label ("" none), azFD
	// cloud-provider-azure's proposed topology.kubernetes.azure.com/fault-domain ("" none), ud
	// pool-labeler's update-domain label ("" none).
	zone, fd, azFD, ud string
}

func (a azureNode) node() *v1.Node {
	var name, providerID string
	switch a.kind {
	case "vmss":
		vmss := fmt.Sprintf("aks-%s-27255451-vmss", a.pool)
		name = fmt.Sprintf("%s%06d", vmss, a.i)
		providerID = fmt.Sprintf("%svirtualMachineScaleSets/%s/virtualMachines/%d", azurePrefix, vmss, a.i)
	case "vms":
		name = fmt.Sprintf("aks-%s-27255451-vms%d", a.pool, a.i)
		providerID = azurePrefix + "virtualMachines/" + name
	default:
		name = fmt.Sprintf("aks-%s-27255451-%d", a.pool, a.i)
		providerID = azurePrefix + "virtualMachines/" + name
	}
	n := st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", a.pool).Label(v1.LabelHostname, name)
	for k, v := range map[string]string{zoneKey: a.zone, fdKey: a.fd, configv1.AzureFaultDomainLabelKey: a.azFD, udKey: a.ud} {
		if v != "" {
			n.Label(k, v)
		}
	}
	node := n.Obj()
	node.Spec.ProviderID = providerID
	return node
}

func nodesOf(list ...azureNode) []*v1.Node {
	out := make([]*v1.Node, len(list))
	for i, a := range list {
		out[i] = a.node()
	}
	return out
}

// pool builds n nodes of one kind; each field function gives node i's label value.
func poolOf(kind, pool string, n int, zone, fd, azFD, ud func(i int) string) []azureNode {
	out := make([]azureNode, n)
	for i := range out {
		out[i] = azureNode{kind: kind, pool: pool, i: i, zone: zone(i), fd: fd(i), azFD: azFD(i), ud: ud(i)}
	}
	return out
}

func constant(v string) func(int) string { return func(int) string { return v } }
func mod(n int, prefix string) func(int) string {
	return func(i int) string { return fmt.Sprintf("%s%d", prefix, i%n) }
}

// TestPoolDomains: each spread dimension's distinct values per pool, for every node kind of
// docs/azure.md's table, with the default dimensions, and the dimensions that cannot spread.
func TestPoolDomains(t *testing.T) {
	none := constant("")
	tests := []struct {
		name  string
		nodes []azureNode
		// want: per pool, distinct values of zone / update-domain / host.
		want map[string][3]int
		// wantZoneKeys: per pool, the keys that gave the zone dimension its values.
		wantZoneKeys map[string][]string
		// wantDegenerate: the details of DegenerateDomains, in order.
		wantDegenerate []string
	}{{
		name: "availability set (legacy): 2 fault domains in the zone label, 3 update domains",
		// cloud-provider-azure writes the fault domain into the zone label, pool-labeler its own.
		nodes:        poolOf("as", "nodepool1", 6, mod(2, ""), mod(2, ""), none, mod(3, "")),
		want:         map[string][3]int{"nodepool1": {2, 3, 6}},
		wantZoneKeys: map[string][]string{"nodepool1": {zoneKey}},
	}, {
		name: "Uniform scale set, regional, fault-domain count 1 (AKS default): zone 0 everywhere",
		// Update domains as a pool of six would have to be measured (docs/azure.md): here they vary.
		nodes:          poolOf("vmss", "userpool", 6, constant("0"), constant("0"), none, mod(5, "")),
		want:           map[string][3]int{"userpool": {1, 5, 6}},
		wantZoneKeys:   map[string][]string{"userpool": {zoneKey}},
		wantDegenerate: []string{`zone: 1 value in pool userpool ("0" on 6 of 6 nodes via topology.kubernetes.io/zone): not spread`},
	}, {
		name:         "Uniform scale set over three zones",
		nodes:        poolOf("vmss", "zonal", 6, func(i int) string { return fmt.Sprintf("westeurope-%d", i%3+1) }, none, none, constant("0")),
		want:         map[string][3]int{"zonal": {3, 1, 6}},
		wantZoneKeys: map[string][]string{"zonal": {zoneKey}},
		wantDegenerate: []string{
			`update-domain: 1 value in pool zonal ("0" on 6 of 6 nodes via topology.pool-scheduler.io/update-domain): not spread`,
		},
	}, {
		name:         "Virtual Machines node pool: standalone VMs, fault and update domain 0",
		nodes:        poolOf("vms", "vmpool", 4, constant("0"), constant("0"), none, constant("0")),
		want:         map[string][3]int{"vmpool": {1, 1, 4}},
		wantZoneKeys: map[string][]string{"vmpool": {zoneKey}},
		wantDegenerate: []string{
			`zone: 1 value in pool vmpool ("0" on 4 of 4 nodes via topology.kubernetes.io/zone): not spread`,
			`update-domain: 1 value in pool vmpool ("0" on 4 of 4 nodes via topology.pool-scheduler.io/update-domain): not spread`,
		},
	}, {
		name: "labelled as cloud-provider-azure PR #10907 would: no zone label outside zones, its fault-domain label read instead",
		nodes: append(
			poolOf("as", "regional", 4, none, mod(2, ""), mod(2, ""), mod(2, "")),
			// Zonal VMs get the fault-domain label too, with the same value in every zone: the
			// zone label comes first, so the zones are not hidden.
			poolOf("vmss", "zonal", 3, func(i int) string { return fmt.Sprintf("westeurope-%d", i+1) }, none, constant("0"), mod(3, ""))...),
		want:         map[string][3]int{"regional": {2, 2, 4}, "zonal": {3, 3, 3}},
		wantZoneKeys: map[string][]string{"regional": {configv1.AzureFaultDomainLabelKey}, "zonal": {zoneKey}},
	}, {
		name:  "update-domain label missing on some nodes (the domain labeler not there yet)",
		nodes: poolOf("vmss", "late", 3, mod(3, "westeurope-"), none, none, func(i int) string { return map[int]string{0: "1"}[i] }),
		want:  map[string][3]int{"late": {3, 1, 3}},
		wantDegenerate: []string{
			`update-domain: 1 value in pool late ("1" on 1 of 3 nodes via topology.pool-scheduler.io/update-domain): not spread`,
		},
		wantZoneKeys: map[string][]string{"late": {zoneKey}},
	}, {
		name:  "no update-domain label anywhere",
		nodes: poolOf("vmss", "bare", 2, mod(2, "westeurope-"), none, none, none),
		want:  map[string][3]int{"bare": {2, 0, 2}},
		wantDegenerate: []string{
			"update-domain: none of the 2 nodes of pool bare carries its labels: not spread",
		},
		wantZoneKeys: map[string][]string{"bare": {zoneKey}},
	}, {
		name:         "a pool of one node is not reported",
		nodes:        poolOf("vms", "single", 1, constant("0"), constant("0"), none, constant("0")),
		want:         map[string][3]int{"single": {1, 1, 1}},
		wantZoneKeys: map[string][]string{"single": {zoneKey}},
	}}
	policy := DefaultPolicy()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools := PoolDomainsOf(policy.Gate.Identity, policy.Dimensions, nodesOf(tt.nodes...))
			got := map[string][3]int{}
			gotKeys := map[string][]string{}
			for _, p := range pools {
				if len(p.Dimensions) != 3 {
					t.Fatalf("pool %s: %d dimensions, want the 3 default ones", p.Pool, len(p.Dimensions))
				}
				got[p.Pool] = [3]int{p.Dimensions[0].Distinct, p.Dimensions[1].Distinct, p.Dimensions[2].Distinct}
				gotKeys[p.Pool] = p.Dimensions[0].Keys
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("distinct domains per pool (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantZoneKeys, gotKeys); diff != "" {
				t.Errorf("zone keys per pool (-want +got):\n%s", diff)
			}
			var details []string
			for _, f := range DegenerateDomains(pools) {
				details = append(details, f.Detail)
				if f.Fix == "" {
					t.Errorf("%s: no fix", f.Detail)
				}
			}
			if diff := cmp.Diff(tt.wantDegenerate, details); diff != "" {
				t.Errorf("DegenerateDomains (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDegenerateDomainsInReport: Compute reports the pools' domains and the dimensions that
// cannot spread, and does not count them as findings (they are facts about the nodes).
func TestDegenerateDomainsInReport(t *testing.T) {
	nodes := nodesOf(poolOf("vmss", "userpool", 3, constant("0"), constant("0"), none(), mod(3, ""))...)
	r := Compute(Inputs{Nodes: nodes}, DefaultPolicy())
	if r.NumFindings() != 0 {
		t.Errorf("NumFindings() = %d, want 0: a degenerate dimension is not a placement finding", r.NumFindings())
	}
	if len(r.Domains) != 1 || r.Domains[0].Pool != "userpool" || r.Domains[0].Nodes != 3 {
		t.Fatalf("Domains = %+v, want userpool with 3 nodes", r.Domains)
	}
	if len(r.DegenerateDomains) != 1 || !strings.HasPrefix(r.DegenerateDomains[0].Detail, "zone: 1 value in pool userpool") ||
		!strings.Contains(r.DegenerateDomains[0].Fix, "--zones") {
		t.Errorf("DegenerateDomains = %+v, want the zone of userpool, with --zones as the fix", r.DegenerateDomains)
	}
}

func none() func(int) string { return constant("") }
