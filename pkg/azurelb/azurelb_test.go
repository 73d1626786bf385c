package azurelb

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// TestAzureVMSet: the availability set or scale set cloud-provider-azure puts a node in, from
// what the cluster shows of it (its providerID and, for availability sets, AKS's VM name).
func TestAzureVMSet(t *testing.T) {
	const prefix = "azure:///subscriptions/sub/resourceGroups/mc_rg/providers/Microsoft.Compute/"
	node := func(name, providerID string) *v1.Node {
		n := st.MakeNode().Name(name).Obj()
		n.Spec.ProviderID = providerID
		return n
	}
	tests := []struct {
		name   string
		node   *v1.Node
		want   string
		wantOK bool
	}{
		{name: "availability set, from the AKS VM name", node: node("aks-pool-1-27255451-0", prefix+"virtualMachines/aks-pool-1-27255451-0"),
			want: "pool-1-availabilitySet-27255451", wantOK: true},
		{name: "scale set, from the providerID", node: node("aks-user-27255451-vmss000003", prefix+"virtualMachineScaleSets/aks-user-27255451-vmss/virtualMachines/3"),
			want: "aks-user-27255451-vmss", wantOK: true},
		// Standalone VMs of a Virtual Machines node pool: cloud-provider-azure's availability-set
		// path finds no set for them.
		{name: "VM of a Virtual Machines pool: in no set", node: node("aks-batch-31415926-vms0", prefix+"virtualMachines/aks-batch-31415926-vms0"), wantOK: true},
		{name: "VM not named by AKS", node: node("worker-1", prefix+"virtualMachines/worker-1")},
		{name: "not Azure", node: node("gke-x", "gce://project/europe-west1-b/gke-x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AzureVMSet(tt.node)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("AzureVMSet() = (%q, %v), want (%q, %v)", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestExclusionLabelsAreReserved: every label with which cloud-provider-azure keeps a node out
// of its load balancers (Exclusion) is one no NodePoolLabelSet may set and the labeler's policy
// refuses (pool.IsReservedKey): a labeler writing one could empty every LoadBalancer Service.
func TestExclusionLabelsAreReserved(t *testing.T) {
	for _, key := range []string{ExcludeFromLoadBalancersLabel, AzureManagedLabel, AzureResourceGroupLabel,
		"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master", "kubernetes.io/role"} {
		if !pool.IsReservedKey(key) {
			t.Errorf("%s takes a node out of Azure's load balancers but pool.IsReservedKey(%q) is false", key, key)
		}
	}
}
