package poolctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
)

// azureCloudConfig holds the fields of cloud-provider-azure's cloud config (the azure.json or
// cloud-config file its cloud-controller-manager reads; pkg/provider/config/azure.go Config)
// that decide load-balancer backend pools. The file also holds credentials (aadClientSecret,
// ...): they are not decoded, and no error quotes the file. cloud-provider-azure reads the file
// as YAML (JSON being YAML) into JSON-tagged fields, so field names match without case, as
// here; it is not a dependency of pool-scheduler.
type azureCloudConfig struct {
	LoadBalancerSku                            string                      `json:"loadBalancerSku"`
	VMType                                     string                      `json:"vmType"`
	PrimaryAvailabilitySetName                 string                      `json:"primaryAvailabilitySetName"`
	PrimaryScaleSetName                        string                      `json:"primaryScaleSetName"`
	ResourceGroup                              string                      `json:"resourceGroup"`
	ExcludeMasterFromStandardLB                *bool                       `json:"excludeMasterFromStandardLB"`
	LoadBalancerBackendPoolConfigurationType   string                      `json:"loadBalancerBackendPoolConfigurationType"`
	MultipleStandardLoadBalancerConfigurations []azurelb.AzureLoadBalancer `json:"multipleStandardLoadBalancerConfigurations"`
}

// parseAzureCloudConfig reads a cloud config into the load-balancer model, with cloud-provider-azure's
// defaults (setLBDefaults, InitializeCloudFromConfig): the Standard SKU, scale sets
// (vmType vmss, whose primary set is primaryScaleSetName; standard: primaryAvailabilitySetName),
// NIC-based backend pools. Errors name the field.
func parseAzureCloudConfig(data []byte) (azurelb.LoadBalancerModel, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return azurelb.LoadBalancerModel{}, errors.New("empty")
	}
	doc, err := yaml.YAMLToJSON(data)
	if err != nil {
		return azurelb.LoadBalancerModel{}, fmt.Errorf("neither JSON nor YAML: %w", err)
	}
	var c azureCloudConfig
	if err := json.Unmarshal(doc, &c); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			// Value is the JSON kind (number, array, ...), never the value itself.
			if typeErr.Field == "" {
				return azurelb.LoadBalancerModel{}, fmt.Errorf("a cloud config is a map of fields, not %s", withArticle(typeErr.Value))
			}
			return azurelb.LoadBalancerModel{}, fmt.Errorf("%s: %s where %s is expected", typeErr.Field, withArticle(typeErr.Value), withArticle(typeErr.Type.String()))
		}
		return azurelb.LoadBalancerModel{}, err
	}
	m := azurelb.LoadBalancerModel{
		AzureResourceGroup:               c.ResourceGroup,
		AzureExcludeMasterFromStandardLB: c.ExcludeMasterFromStandardLB,
		AzureLoadBalancers:               c.MultipleStandardLoadBalancerConfigurations,
	}
	switch {
	case c.LoadBalancerSku == "" || strings.EqualFold(c.LoadBalancerSku, azurelb.SKUStandard):
		m.AzureSKU = azurelb.SKUStandard
	case strings.EqualFold(c.LoadBalancerSku, azurelb.SKUBasic):
		m.AzureSKU = azurelb.SKUBasic
	case strings.EqualFold(c.LoadBalancerSku, "service"):
		return azurelb.LoadBalancerModel{}, errors.New("loadBalancerSku: service (pods behind a service gateway) is not modelled by poolctl audit")
	default:
		return azurelb.LoadBalancerModel{}, fmt.Errorf("loadBalancerSku: %q is not standard or basic", c.LoadBalancerSku)
	}
	switch {
	case c.VMType == "" || strings.EqualFold(c.VMType, "vmss") || strings.EqualFold(c.VMType, "vmssflex"):
		m.AzurePrimaryVMSet = c.PrimaryScaleSetName
	case strings.EqualFold(c.VMType, "standard"):
		m.AzurePrimaryVMSet = c.PrimaryAvailabilitySetName
	default:
		return azurelb.LoadBalancerModel{}, fmt.Errorf("vmType: %q is not vmss, vmssflex or standard", c.VMType)
	}
	switch t := c.LoadBalancerBackendPoolConfigurationType; {
	case t == "":
		// nodeIPConfiguration, the default, as the model reads "".
	case strings.EqualFold(t, azurelb.BackendPoolNodeIPConfiguration):
		m.AzureBackendPoolType = azurelb.BackendPoolNodeIPConfiguration
	case strings.EqualFold(t, azurelb.BackendPoolNodeIP):
		m.AzureBackendPoolType = azurelb.BackendPoolNodeIP
	case strings.EqualFold(t, "podIP"):
		return azurelb.LoadBalancerModel{}, errors.New("loadBalancerBackendPoolConfigurationType: podIP (pods in the backend pool) is not modelled by poolctl audit")
	default:
		return azurelb.LoadBalancerModel{}, fmt.Errorf("loadBalancerBackendPoolConfigurationType: %q is not nodeIPConfiguration or nodeIP", t)
	}
	if err := m.Validate(); err != nil {
		return azurelb.LoadBalancerModel{}, err
	}
	return m, nil
}

func withArticle(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

// loadBalancerModel is the Azure load-balancer model of the audit: --azure-cloud-config, with
// the explicit flags over it; without either, a Standard load balancer.
func (o auditOptions) loadBalancerModel() (azurelb.LoadBalancerModel, error) {
	m := azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard}
	if o.azureCloudConfig != "" {
		data, err := os.ReadFile(o.azureCloudConfig)
		if err != nil {
			return m, fmt.Errorf("--azure-cloud-config: %w", err)
		}
		if m, err = parseAzureCloudConfig(data); err != nil {
			return m, fmt.Errorf("--azure-cloud-config %s: %w", o.azureCloudConfig, err)
		}
	}
	switch {
	case o.lbSKU == "":
	case strings.EqualFold(o.lbSKU, azurelb.SKUStandard):
		m.AzureSKU = azurelb.SKUStandard
	case strings.EqualFold(o.lbSKU, azurelb.SKUBasic):
		m.AzureSKU = azurelb.SKUBasic
	default:
		return m, fmt.Errorf("--azure-load-balancer-sku: %q is not Standard or Basic", o.lbSKU)
	}
	if o.primaryVMSet != "" {
		m.AzurePrimaryVMSet = o.primaryVMSet
	}
	if o.resourceGroup != "" {
		m.AzureResourceGroup = o.resourceGroup
	}
	// The SKU flag may turn the file's load balancers on.
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("--azure-cloud-config %s with --azure-load-balancer-sku %s: %w", o.azureCloudConfig, o.lbSKU, err)
	}
	return m, nil
}

// namespaceLabels reads the namespaces' labels when a load balancer selects Services by
// namespace; nil (not read) otherwise, or when the credentials may not list namespaces.
func namespaceLabels(ctx context.Context, cs kubernetes.Interface, m azurelb.LoadBalancerModel) (map[string]map[string]string, error) {
	needed := false
	for _, lb := range m.AzureLoadBalancers {
		needed = needed || lb.ServiceNamespaceSelector != nil
	}
	if !needed {
		return nil, nil
	}
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(list.Items))
	for _, ns := range list.Items {
		out[ns.Name] = ns.Labels
	}
	return out, nil
}
