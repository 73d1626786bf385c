package simulate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestBuiltinScenariosParse(t *testing.T) {
	names := BuiltinNames()
	if len(names) < 3 {
		t.Fatalf("built-in scenarios: %v", names)
	}
	for _, name := range names {
		if _, err := Load(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseErrorsNameTheLineAndField(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// want are substrings of the error.
		want []string
	}{
		{
			name: "unknown field",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n  node: 2\n",
			want: []string{"bad.yaml", "line 5", "field node not found"},
		},
		{
			name: "invalid value",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n- name: b\n  nodes: 0\n",
			want: []string{"bad.yaml:6:", "pools[1].nodes"},
		},
		{
			name: "invalid label in a label set",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n  labelSet:\n    kubernetes.io/arch: arm64\n",
			want: []string{"bad.yaml:6:", "pools[0].labelSet[kubernetes.io/arch]", "reserved"},
		},
		{
			name: "bad taint effect",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n  taints:\n  - key: k\n    effect: Sometimes\n",
			want: []string{"bad.yaml:7:", "pools[0].taints[0].effect"},
		},
		{
			name: "service naming an unknown workload",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\nservices:\n- name: lb\n  workload: nope\n",
			want: []string{"bad.yaml:7:", "services[0].workload"},
		},
		{
			name: "bad duration",
			yaml: "name: x\npools:\n- name: a\n  joiningNodes: 1\n  joinAfter: soon\n",
			want: []string{"line 5", "not a duration"},
		},
		{
			name: "a Virtual Machines node pool with update domains",
			yaml: "name: x\nazure: {}\npools:\n- name: a\n  nodes: 2\n  vmType: virtualMachines\n  updateDomains: 3\n",
			want: []string{"bad.yaml:7:", "pools[0].updateDomains", "update domain 0"},
		},
		{
			name: "an unknown vmType",
			yaml: "name: x\nazure: {}\npools:\n- name: a\n  nodes: 2\n  vmType: flexible\n",
			want: []string{"bad.yaml:6:", "pools[0].vmType", `"scaleSet"`, `"virtualMachines"`},
		},
		{
			name: "not YAML",
			yaml: "name: [x\n",
			want: []string{"bad.yaml", "line"},
		},
		{
			name: "missing name and pools",
			yaml: "description: nothing\n",
			want: []string{"bad.yaml:1:", "name: Required", "pools: Required"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadUnknownScenario(t *testing.T) {
	_, err := Load("no-such-scenario")
	if err == nil || !strings.Contains(err.Error(), "late-labels") {
		t.Fatalf("error %v should list the built-in scenarios", err)
	}
}

// TestAzureNodes: with azure, each vmType's nodes are named, identified and labelled as AKS,
// cloud-provider-azure and pool-labeler do it (docs/azure.md, "What each node kind reports").
func TestAzureNodes(t *testing.T) {
	sc, err := Parse("aks.yaml", []byte(`name: aks
azure: {}
pools:
- {name: user, nodes: 3}
- {name: zonal, nodes: 3, zones: 3, updateDomains: 2}
- {name: vmpool, nodes: 2, vmType: virtualMachines}
- {name: legacy, nodes: 2, vmType: availabilitySet, faultDomains: 2, updateDomains: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Name, ProviderID, Zone, FaultDomain, UpdateDomain string
	}
	var got []node
	for i := range sc.Pools {
		p := &sc.Pools[i]
		for n := range min(p.Nodes, 2) {
			built := sc.buildNode(p, n, true)
			got = append(got, node{built.Name, strings.TrimPrefix(built.Spec.ProviderID, azureResourcePrefix),
				built.Labels[v1.LabelTopologyZone], built.Labels[FaultDomainKey], built.Labels[UpdateDomainKey]})
		}
	}
	want := []node{
		// A scale set's default fault-domain count 1: zone 0 everywhere; no update domain given.
		{"aks-user-27255451-vmss000000", "virtualMachineScaleSets/aks-user-27255451-vmss/virtualMachines/0", "0", "0", ""},
		{"aks-user-27255451-vmss000001", "virtualMachineScaleSets/aks-user-27255451-vmss/virtualMachines/1", "0", "0", ""},
		{"aks-zonal-27255451-vmss000000", "virtualMachineScaleSets/aks-zonal-27255451-vmss/virtualMachines/0", "westeurope-1", "", "0"},
		{"aks-zonal-27255451-vmss000001", "virtualMachineScaleSets/aks-zonal-27255451-vmss/virtualMachines/1", "westeurope-2", "", "0"},
		{"aks-vmpool-27255451-vms0", "virtualMachines/aks-vmpool-27255451-vms0", "0", "0", "0"},
		{"aks-vmpool-27255451-vms1", "virtualMachines/aks-vmpool-27255451-vms1", "0", "0", "0"},
		{"aks-legacy-27255451-0", "virtualMachines/aks-legacy-27255451-0", "0", "0", "0"},
		{"aks-legacy-27255451-1", "virtualMachines/aks-legacy-27255451-1", "1", "1", "0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	sets := map[string]string{}
	for i := range sc.Pools {
		sets[sc.Pools[i].Name] = sc.VMSetName(&sc.Pools[i])
	}
	wantSets := map[string]string{"user": "aks-user-27255451-vmss", "zonal": "aks-zonal-27255451-vmss", "vmpool": "", "legacy": "legacy-availabilitySet-27255451"}
	if diff := cmp.Diff(wantSets, sets); diff != "" {
		t.Errorf("VM sets (-want +got):\n%s", diff)
	}
}

// TestDocScenariosParse: the scenarios docs/maintenance.md measures with, outside the built-ins
// (docs/scenarios/*.yaml), load as `poolctl simulate --scenario <file>` loads them.
func TestDocScenariosParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/scenarios: %v, %d files", err, len(files))
	}
	for _, f := range files {
		sc, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".yaml"); sc.Name != want || sc.Maintenance == nil {
			t.Errorf("%s: name %q (want %q), maintenance %v", f, sc.Name, want, sc.Maintenance != nil)
		}
	}
}
