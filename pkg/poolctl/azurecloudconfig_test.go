package poolctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
)

// aksAzureJSON is an AKS node's /etc/kubernetes/azure.json as cloud-provider-azure reads it,
// credentials included: only the load-balancer fields are read.
const aksAzureJSON = `{
    "cloud": "AzurePublicCloud",
    "tenantId": "11111111-1111-1111-1111-111111111111",
    "subscriptionId": "00000000-0000-0000-0000-000000000000",
    "aadClientId": "msi",
    "aadClientSecret": "s3cr3t-do-not-print",
    "resourceGroup": "MC_rg_cluster_westeurope",
    "location": "westeurope",
    "vmType": "vmss",
    "subnetName": "aks-subnet",
    "securityGroupName": "aks-agentpool-31415926-nsg",
    "vnetName": "aks-vnet-31415926",
    "vnetResourceGroup": "",
    "routeTableName": "aks-agentpool-31415926-routetable",
    "primaryAvailabilitySetName": "",
    "primaryScaleSetName": "aks-system-31415926-vmss",
    "cloudProviderBackoffMode": "v2",
    "cloudProviderBackoff": true,
    "cloudProviderBackoffRetries": 6,
    "cloudProviderBackoffDuration": 5,
    "cloudProviderRateLimit": true,
    "cloudProviderRateLimitQPS": 10,
    "cloudProviderRateLimitBucket": 100,
    "useManagedIdentityExtension": true,
    "userAssignedIdentityID": "22222222-2222-2222-2222-222222222222",
    "useInstanceMetadata": true,
    "loadBalancerSku": "Standard",
    "disableOutboundSNAT": false,
    "excludeMasterFromStandardLB": true,
    "providerVaultName": "",
    "maximumLoadBalancerRuleCount": 250,
    "providerKeyName": "k8s",
    "providerKeyVersion": ""
}`

// multiSLBYAML is a cloud config in YAML with two Standard load balancers.
const multiSLBYAML = `loadBalancerSku: standard
resourceGroup: MC_rg_cluster_westeurope
loadBalancerBackendPoolConfigurationType: nodeIP
multipleStandardLoadBalancerConfigurations:
- name: kubernetes
  primaryVMSet: aks-system-31415926-vmss
- name: lb-user
  primaryVMSet: aks-user-31415926-vmss
  allowServicePlacement: false
  serviceLabelSelector: {matchLabels: {lb: user}}
  nodeSelector:
    matchExpressions: [{key: kubernetes.azure.com/mode, operator: In, values: [user]}]
`

func TestParseAzureCloudConfig(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    azurelb.LoadBalancerModel
		wantErr string
	}{
		{name: "AKS azure.json", data: aksAzureJSON, want: azurelb.LoadBalancerModel{
			AzureSKU: azurelb.SKUStandard, AzurePrimaryVMSet: "aks-system-31415926-vmss", AzureResourceGroup: "MC_rg_cluster_westeurope",
			AzureExcludeMasterFromStandardLB: ptr.To(true)}},
		{name: "defaults: Standard, scale sets, NIC-based pools", data: `{}`, want: azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard}},
		{name: "NIC-based pools named", data: `{"loadBalancerBackendPoolConfigurationType": "NodeIPConfiguration"}`,
			want: azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard, AzureBackendPoolType: azurelb.BackendPoolNodeIPConfiguration}},
		{name: "availability sets: the primary availability set", data: `{"vmType": "standard", "loadBalancerSku": "basic", "primaryAvailabilitySetName": "agentpool-availabilitySet-31415926", "primaryScaleSetName": "x"}`,
			want: azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUBasic, AzurePrimaryVMSet: "agentpool-availabilitySet-31415926"}},
		{name: "field names without case, as cloud-provider-azure reads them", data: `{"LoadBalancerSKU": "Basic"}`,
			want: azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUBasic}},
		{name: "YAML, two Standard load balancers", data: multiSLBYAML, want: azurelb.LoadBalancerModel{
			AzureSKU: azurelb.SKUStandard, AzureResourceGroup: "MC_rg_cluster_westeurope", AzureBackendPoolType: azurelb.BackendPoolNodeIP,
			AzureLoadBalancers: []azurelb.AzureLoadBalancer{
				{Name: "kubernetes", PrimaryVMSet: "aks-system-31415926-vmss"},
				{Name: "lb-user", PrimaryVMSet: "aks-user-31415926-vmss", AllowServicePlacement: ptr.To(false),
					ServiceLabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lb": "user"}},
					NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "kubernetes.azure.com/mode", Operator: metav1.LabelSelectorOpIn, Values: []string{"user"}}}}},
			}}},
		{name: "empty", data: " \n", wantErr: "empty"},
		{name: "not a map", data: `[1, 2]`, wantErr: "a cloud config is a map of fields, not an array"},
		{name: "a field of the wrong type", data: `{"loadBalancerSku": 1}`, wantErr: "loadBalancerSku: a number where a string is expected"},
		{name: "a nested field of the wrong type", data: `{"multipleStandardLoadBalancerConfigurations": [{"name": "a", "primaryVMSet": ["x"]}]}`,
			wantErr: "multipleStandardLoadBalancerConfigurations.primaryVMSet: an array where a string is expected"},
		{name: "an unknown SKU", data: `{"loadBalancerSku": "premium"}`, wantErr: `loadBalancerSku: "premium" is not standard or basic`},
		{name: "the service SKU", data: `{"loadBalancerSku": "service"}`, wantErr: "loadBalancerSku: service (pods behind a service gateway) is not modelled"},
		{name: "an unknown vmType", data: `{"vmType": "vmas"}`, wantErr: `vmType: "vmas" is not vmss, vmssflex or standard`},
		{name: "pod IP backend pools", data: `{"loadBalancerBackendPoolConfigurationType": "podIP"}`, wantErr: "loadBalancerBackendPoolConfigurationType: podIP (pods in the backend pool) is not modelled"},
		{name: "multiple load balancers need IP-based pools",
			data:    `{"multipleStandardLoadBalancerConfigurations": [{"name": "kubernetes", "primaryVMSet": "aks-system-31415926-vmss"}]}`,
			wantErr: "multipleStandardLoadBalancerConfigurations: cloud-provider-azure refuses them unless loadBalancerBackendPoolConfigurationType is nodeIP (it is nodeIPConfiguration, the default)"},
		{name: "a configuration without primary VM set",
			data:    `{"loadBalancerBackendPoolConfigurationType": "nodeIP", "multipleStandardLoadBalancerConfigurations": [{"name": "kubernetes"}]}`,
			wantErr: "multipleStandardLoadBalancerConfigurations[0].primaryVMSet: empty"},
		{name: "two configurations of one name",
			data:    `{"loadBalancerBackendPoolConfigurationType": "nodeIP", "multipleStandardLoadBalancerConfigurations": [{"name": "a", "primaryVMSet": "x"}, {"name": "A", "primaryVMSet": "y"}]}`,
			wantErr: `multipleStandardLoadBalancerConfigurations[1].name: "A" is also configuration [0]'s`},
		{name: "a VM set primary of two",
			data:    `{"loadBalancerBackendPoolConfigurationType": "nodeIP", "multipleStandardLoadBalancerConfigurations": [{"name": "a", "primaryVMSet": "x"}, {"name": "b", "primaryVMSet": "x"}]}`,
			wantErr: `multipleStandardLoadBalancerConfigurations[1].primaryVMSet: "x" is also configuration [0]'s`},
		{name: "an invalid selector",
			data:    `{"loadBalancerBackendPoolConfigurationType": "nodeIP", "multipleStandardLoadBalancerConfigurations": [{"name": "a", "primaryVMSet": "x", "nodeSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}]}`,
			wantErr: `multipleStandardLoadBalancerConfigurations[0].nodeSelector: "Near" is not a valid label selector operator`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAzureCloudConfig([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAuditLoadBalancerFlags: the explicit flags override the cloud config; the existing flags
// keep working without it; errors name the flag and the file.
func TestAuditLoadBalancerFlags(t *testing.T) {
	dir := t.TempDir()
	aks := filepath.Join(dir, "azure.json")
	multi := filepath.Join(dir, "cloud-config.yaml")
	secret := filepath.Join(dir, "bad.json")
	for path, data := range map[string]string{aks: aksAzureJSON, multi: multiSLBYAML, secret: `{"aadClientSecret": "s3cr3t-do-not-print", "loadBalancerSku": {"a": 1}}`} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		o       auditOptions
		want    func(m *azurelb.LoadBalancerModel)
		wantErr string
	}{
		{name: "nothing: Standard", o: auditOptions{}, want: func(m *azurelb.LoadBalancerModel) {}},
		{name: "the old flags", o: auditOptions{lbSKU: "basic", primaryVMSet: "system-availabilitySet-27255451"}, want: func(m *azurelb.LoadBalancerModel) {
			m.AzureSKU, m.AzurePrimaryVMSet = azurelb.SKUBasic, "system-availabilitySet-27255451"
		}},
		{name: "the file", o: auditOptions{azureCloudConfig: aks}, want: func(m *azurelb.LoadBalancerModel) {
			m.AzurePrimaryVMSet, m.AzureResourceGroup = "aks-system-31415926-vmss", "MC_rg_cluster_westeurope"
			m.AzureExcludeMasterFromStandardLB = ptr.To(true)
		}},
		{name: "flags over the file", o: auditOptions{azureCloudConfig: aks, lbSKU: "Basic", primaryVMSet: "aks-user-31415926-vmss", resourceGroup: "mc_other"},
			want: func(m *azurelb.LoadBalancerModel) {
				m.AzureSKU, m.AzurePrimaryVMSet, m.AzureResourceGroup = azurelb.SKUBasic, "aks-user-31415926-vmss", "mc_other"
				m.AzureExcludeMasterFromStandardLB = ptr.To(true)
			}},
		{name: "an unknown SKU flag", o: auditOptions{lbSKU: "Premium"}, wantErr: `--azure-load-balancer-sku: "Premium" is not Standard or Basic`},
		{name: "a missing file", o: auditOptions{azureCloudConfig: filepath.Join(dir, "missing.json")}, wantErr: "--azure-cloud-config: open " + filepath.Join(dir, "missing.json")},
		{name: "a bad field names the file and the field, not the secret", o: auditOptions{azureCloudConfig: secret},
			wantErr: "--azure-cloud-config " + secret + ": loadBalancerSku: an object where a string is expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.o.loadBalancerModel()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "s3cr3t") {
					t.Fatalf("error %v, want one containing %q and no secret", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard}
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// Two load balancers: read, and the Service placement they imply is the report's.
	m, err := auditOptions{azureCloudConfig: multi}.loadBalancerModel()
	if err != nil || len(m.AzureLoadBalancers) != 2 {
		t.Fatalf("%s: %+v, %v", multi, m, err)
	}
}
