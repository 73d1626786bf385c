package azurelb

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Load-balancer annotations and labels that decide a Service's backend. The rules, with their
// sources in kubernetes-sigs/cloud-provider-azure, are in docs/azure.md.
const (
	// AzureLoadBalancerModeAnnotation names the availability set or scale set whose load
	// balancer serves the Service, or __auto__ (cloud-provider-azure, Basic SKU only; a Standard
	// load balancer ignores it).
	AzureLoadBalancerModeAnnotation = "service.beta.kubernetes.io/azure-load-balancer-mode"
	// AzureAutoMode lets cloud-provider-azure pick the set with the fewest load-balancing rules.
	AzureAutoMode = "__auto__"
	// AzureLoadBalancerConfigurationsAnnotation names the load balancers of
	// multipleStandardLoadBalancerConfigurations a Service may be placed on (comma-separated;
	// consts.ServiceAnnotationLoadBalancerConfigurations).
	AzureLoadBalancerConfigurationsAnnotation = "service.beta.kubernetes.io/azure-load-balancer-configurations"
	// LoadBalancerPoolsAnnotation is pool-scheduler's provider-neutral annotation: the pools
	// (comma-separated pool names) behind the Service's load balancer, for clouds the audit
	// does not model.
	LoadBalancerPoolsAnnotation = "pool-scheduler.io/load-balancer-pools"
	// ExcludeFromLoadBalancersLabel keeps a node out of every load balancer's backend pool
	// (cloud-provider-azure: present with any value).
	ExcludeFromLoadBalancersLabel = v1.LabelNodeExcludeBalancers
	// AzureResourceGroupLabel names the resource group of a node outside the cluster's
	// (consts.ExternalResourceGroupLabel).
	AzureResourceGroupLabel = "kubernetes.azure.com/resource-group"
	// AzureManagedLabel "false" marks nodes cloud-provider-azure does not manage (on-premises
	// nodes): never in a backend pool.
	AzureManagedLabel = "kubernetes.azure.com/managed"
)

// Azure load balancer SKUs and backend pool types (cloud config loadBalancerSku and
// loadBalancerBackendPoolConfigurationType).
const (
	SKUStandard = "Standard"
	SKUBasic    = "Basic"
	// BackendPoolNodeIPConfiguration: the pool references the nodes' NICs (cloud-provider-azure's
	// default).
	BackendPoolNodeIPConfiguration = "nodeIPConfiguration"
	// BackendPoolNodeIP: the pool holds the nodes' IP addresses (required by multiple Standard
	// load balancers).
	BackendPoolNodeIP = "nodeIP"
)

// LoadBalancerModel is how the cloud builds a load balancer's backend pool. Only Azure is
// modelled; elsewhere only LoadBalancerPoolsAnnotation says what the backend is. The Azure
// fields are those of cloud-provider-azure's cloud config (pkg/provider/config/azure.go).
type LoadBalancerModel struct {
	// AzureSKU is Standard (the default on AKS; AKS retired Basic on 2025-09-30) or Basic.
	AzureSKU string
	// AzurePrimaryVMSet is cloud-provider-azure's primaryAvailabilitySetName or
	// primaryScaleSetName: the backend of a Basic load balancer without the mode annotation.
	AzurePrimaryVMSet string
	// AzureResourceGroup is the cloud config's resourceGroup (on AKS the node resource group,
	// MC_<group>_<cluster>_<region>). Nodes labelled AzureResourceGroupLabel with another group
	// are excluded from NIC-based backend pools; empty: unknown.
	AzureResourceGroup string
	// AzureBackendPoolType is BackendPoolNodeIPConfiguration (also when empty) or
	// BackendPoolNodeIP.
	AzureBackendPoolType string
	// AzureExcludeMasterFromStandardLB is excludeMasterFromStandardLB; nil: true, the default.
	AzureExcludeMasterFromStandardLB *bool
	// AzureLoadBalancers are multipleStandardLoadBalancerConfigurations: with a Standard SKU and
	// at least one, each Service goes on one of these load balancers.
	AzureLoadBalancers []AzureLoadBalancer
}

// AzureLoadBalancer is one of cloud-provider-azure's multipleStandardLoadBalancerConfigurations
// (pkg/provider/config/multi_slb.go), the fields that place Services and nodes; the JSON names
// are the cloud config's.
type AzureLoadBalancer struct {
	Name string `json:"name"`
	// PrimaryVMSet: every node of this availability set or scale set goes to this load balancer.
	PrimaryVMSet string `json:"primaryVMSet"`
	// AllowServicePlacement false: no new Service goes on it (nil: true).
	AllowServicePlacement    *bool                 `json:"allowServicePlacement,omitempty"`
	NodeSelector             *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	ServiceLabelSelector     *metav1.LabelSelector `json:"serviceLabelSelector,omitempty"`
	ServiceNamespaceSelector *metav1.LabelSelector `json:"serviceNamespaceSelector,omitempty"`
}

// Validate refuses what cloud-provider-azure refuses at start (checkEnableMultipleStandardLoadBalancers),
// naming the cloud config's field.
func (m LoadBalancerModel) Validate() error {
	if !strings.EqualFold(m.AzureSKU, SKUStandard) || len(m.AzureLoadBalancers) == 0 {
		return nil
	}
	if !strings.EqualFold(m.AzureBackendPoolType, BackendPoolNodeIP) {
		t := m.AzureBackendPoolType
		if t == "" {
			t = BackendPoolNodeIPConfiguration + ", the default"
		}
		return fmt.Errorf("multipleStandardLoadBalancerConfigurations: cloud-provider-azure refuses them unless loadBalancerBackendPoolConfigurationType is %s (it is %s)", BackendPoolNodeIP, t)
	}
	names, primaries := map[string]int{}, map[string]int{}
	for i, lb := range m.AzureLoadBalancers {
		field := fmt.Sprintf("multipleStandardLoadBalancerConfigurations[%d]", i)
		if strings.TrimSpace(lb.Name) == "" {
			return fmt.Errorf("%s.name: empty", field)
		}
		if j, dup := names[strings.ToLower(lb.Name)]; dup {
			return fmt.Errorf("%s.name: %q is also configuration [%d]'s", field, lb.Name, j)
		}
		names[strings.ToLower(lb.Name)] = i
		if lb.PrimaryVMSet == "" {
			return fmt.Errorf("%s.primaryVMSet: empty (cloud-provider-azure requires one per configuration)", field)
		}
		if j, dup := primaries[strings.ToLower(lb.PrimaryVMSet)]; dup {
			return fmt.Errorf("%s.primaryVMSet: %q is also configuration [%d]'s (a VM set is the primary of one load balancer)", field, lb.PrimaryVMSet, j)
		}
		primaries[strings.ToLower(lb.PrimaryVMSet)] = i
		for name, sel := range map[string]*metav1.LabelSelector{"nodeSelector": lb.NodeSelector, "serviceLabelSelector": lb.ServiceLabelSelector, "serviceNamespaceSelector": lb.ServiceNamespaceSelector} {
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				return fmt.Errorf("%s.%s: %w", field, name, err)
			}
		}
	}
	return nil
}

// Basic: a Basic SKU load balancer.
func (m LoadBalancerModel) Basic() bool { return strings.EqualFold(m.AzureSKU, SKUBasic) }

// Multi: cloud-provider-azure's UseMultipleStandardLoadBalancers.
func (m LoadBalancerModel) Multi() bool { return !m.Basic() && len(m.AzureLoadBalancers) > 0 }

func (m LoadBalancerModel) nodeIPPools() bool {
	return strings.EqualFold(m.AzureBackendPoolType, BackendPoolNodeIP)
}

var (
	// azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachineScaleSets/<vmss>/virtualMachines/<id>
	vmssProviderID = regexp.MustCompile(`(?i)^azure:///subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/virtualMachineScaleSets/([^/]+)/virtualMachines/[^/]+$`)
	// azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<vm>
	vmProviderID = regexp.MustCompile(`(?i)^azure:///subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)
	// AKS (AgentBaker, aks-engine) names availability-set VMs aks-<pool>-<8-digit cluster hash>-<index>
	// and their set <pool>-availabilitySet-<hash>.
	aksVMName = regexp.MustCompile(`^aks-([a-z0-9][a-z0-9-]*)-([0-9]{8})-([0-9]+)$`)
	// AKS names the VMs of a Virtual Machines node pool aks-<pool>-<8-digit hash>-vms<index>
	// (cluster-autoscaler azure_vms_pool.go): standalone VMs, in no availability set.
	aksVMsPoolName = regexp.MustCompile(`^aks-([a-z0-9][a-z0-9-]*)-([0-9]{8})-vms([0-9]+)$`)
)

// AzureVMSet returns the availability set or scale set a node belongs to, as cloud-provider-azure's
// GetNodeVMSetName sees it: the scale set from its providerID; for a VM outside scale sets
// (availabilitySet.GetNodeVMSetName) its availability set, which AKS names after the VM's pool
// and cluster hash, or "" for a standalone VM of a Virtual Machines node pool, which is in no
// set. ok is false for nodes that are not Azure VMs or whose set cannot be told from the node
// (cloud-provider-azure asks Azure's API; the audit does not).
func AzureVMSet(node *v1.Node) (string, bool) {
	if m := vmssProviderID.FindStringSubmatch(node.Spec.ProviderID); m != nil {
		return m[1], true
	}
	m := vmProviderID.FindStringSubmatch(node.Spec.ProviderID)
	if m == nil {
		return "", false
	}
	name := strings.ToLower(m[1])
	if n := aksVMName.FindStringSubmatch(name); n != nil {
		return n[1] + "-availabilitySet-" + n[2], true
	}
	if aksVMsPoolName.MatchString(name) {
		return "", true
	}
	return "", false
}

// IsAzureNode: the node is an Azure VM (its providerID).
func IsAzureNode(node *v1.Node) bool {
	return strings.HasPrefix(strings.ToLower(node.Spec.ProviderID), "azure://")
}

// isControlPlaneNode is cloud-provider-azure's (azure_standard.go).
func isControlPlaneNode(node *v1.Node) bool {
	_, cp := node.Labels["node-role.kubernetes.io/control-plane"]
	_, master := node.Labels["node-role.kubernetes.io/master"]
	return cp || master || node.Labels["kubernetes.io/role"] == "master"
}

// Exclusion says why cloud-provider-azure keeps the node out of the backend pools of a
// Standard (standard) or Basic load balancer, "" if it does not; unknown says why that cannot
// be told from the cluster.
//   - the exclusion label (any value) and kubernetes.azure.com/managed=false: updateNodeCaches
//     puts the node in excludeLoadBalancerNodes, which ShouldNodeExcludedFromLoadBalancer
//     (NIC-based pools, VMSet.EnsureHostsInPool) and ReconcileBackendPools (IP-based) honour;
//   - control-plane nodes: NIC-based pools exclude them with excludeMasterFromStandardLB
//     (default true), IP-based pools always (backendPoolTypeNodeIP.EnsureHostsInPool);
//   - kubernetes.azure.com/resource-group naming another group than the cloud config's
//     resourceGroup: ShouldNodeExcludedFromLoadBalancer, which only NIC-based pools call.
func (m LoadBalancerModel) Exclusion(node *v1.Node, standard bool) (why, unknown string) {
	if _, ok := node.Labels[ExcludeFromLoadBalancersLabel]; ok {
		return "labelled " + ExcludeFromLoadBalancersLabel, ""
	}
	if strings.EqualFold(node.Labels[AzureManagedLabel], "false") {
		return "labelled " + AzureManagedLabel + "=false (not managed by cloud-provider-azure)", ""
	}
	nodeIP := standard && m.nodeIPPools()
	if standard && isControlPlaneNode(node) && (nodeIP || m.AzureExcludeMasterFromStandardLB == nil || *m.AzureExcludeMasterFromStandardLB) {
		return "a control-plane node", ""
	}
	if rg := node.Labels[AzureResourceGroupLabel]; rg != "" && !nodeIP {
		switch {
		case m.AzureResourceGroup == "":
			return "", fmt.Sprintf("labelled %s=%s, and the cluster's resource group is not known (poolctl audit --azure-resource-group, or resourceGroup in --azure-cloud-config)", AzureResourceGroupLabel, rg)
		case !strings.EqualFold(rg, m.AzureResourceGroup):
			return fmt.Sprintf("in resource group %s, not the cluster's %s (%s)", rg, m.AzureResourceGroup, AzureResourceGroupLabel), ""
		}
	}
	return "", ""
}

// BackendKind is how a backend pool is made up.
type BackendKind int

const (
	BackendAll BackendKind = iota // not modelled: every node
	BackendPools
	BackendAzureStandard
	BackendAzureBasic
)

// Backend is a Service's load-balancer backend pool as far as it can be told.
type Backend struct {
	Kind BackendKind
	// has reports whether a node is in the backend pool; nil: every node is (not modelled).
	Has func(node *v1.Node) bool
	// why, if set, says why a node is not in the pool although it could be (an exclusion).
	Why func(node *v1.Node) string
	// unknown, if set and not empty for a node, says why its membership cannot be told.
	Unknown func(node *v1.Node) string
	// what describes the backend pool for messages.
	What string
	// undetermined, if not empty, says why the backend cannot be told.
	Undetermined string
	// AzureBasic: the fix is to name one availability set or scale set.
	AzureBasic bool
}

// UnknownFor says why node's membership cannot be told ("": it can).
func (b Backend) UnknownFor(node *v1.Node) string {
	if b.Unknown == nil {
		return ""
	}
	return b.Unknown(node)
}

// BackendOf is svc's backend pool: the pools LoadBalancerPoolsAnnotation names (identity tells a
// node's pool), else Azure's (azure: the cluster runs on Azure), else every node.
func (m LoadBalancerModel) BackendOf(svc *v1.Service, azure bool, nodes map[string]*v1.Node, identity pool.Identity) Backend {
	if value := svc.Annotations[LoadBalancerPoolsAnnotation]; value != "" {
		pools := map[string]bool{}
		for _, p := range strings.Split(value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				pools[p] = true
			}
		}
		return Backend{
			Kind: BackendPools,
			Has: func(node *v1.Node) bool {
				p, _ := identity.PoolOf(node.Labels)
				return pools[p]
			},
			What: fmt.Sprintf("pools %s (%s)", strings.Join(slices.Sorted(maps.Keys(pools)), ","), LoadBalancerPoolsAnnotation),
		}
	}
	if !azure {
		return Backend{}
	}
	if !m.Basic() {
		b := Backend{
			Kind: BackendAzureStandard,
			Has: func(node *v1.Node) bool {
				why, unknown := m.Exclusion(node, true)
				return why == "" && unknown == ""
			},
			Why:     func(node *v1.Node) string { why, _ := m.Exclusion(node, true); return why },
			Unknown: func(node *v1.Node) string { _, unknown := m.Exclusion(node, true); return unknown },
			What:    "every node cloud-provider-azure does not exclude (Standard SKU)",
		}
		if m.Multi() {
			// With multiple Standard load balancers a Local Service gets a backend pool of its
			// own, holding the nodes of its endpoints wherever they run
			// (getBackendPoolNameForService, getLocalServiceEndpointsNodeNames): the nodes each
			// load balancer is assigned play no part. Exclusions do not hold there either:
			// checkAndApplyLocalServiceBackendPoolUpdates (azure_local_services.go) puts the IPs
			// of every endpoint's node back (nodePrivateIPs, which excluded nodes are in too)
			// after EnsureHostsInPool took excluded ones out. So every endpoint is a backend.
			b.Has, b.Why, b.Unknown = func(*v1.Node) bool { return true }, nil, nil
			b.What = "the Service's own backend pool, the nodes of its endpoints (multiple Standard load balancers)"
		}
		return b
	}
	mode, annotated := svc.Annotations[AzureLoadBalancerModeAnnotation]
	mode = strings.TrimSpace(mode)
	var set, origin string
	switch {
	case !annotated || mode == "":
		if m.AzurePrimaryVMSet == "" {
			return Backend{Kind: BackendAzureBasic, Undetermined: "Basic SKU without " + AzureLoadBalancerModeAnnotation + ": the backend is the primary availability set or scale set, which is not known (poolctl audit --azure-primary-vmset, or --azure-cloud-config)", AzureBasic: true}
		}
		set, origin = m.AzurePrimaryVMSet, "the primary set, Basic SKU without "+AzureLoadBalancerModeAnnotation
	case strings.EqualFold(mode, AzureAutoMode):
		return Backend{Kind: BackendAzureBasic, Undetermined: AzureAutoMode + " lets cloud-provider-azure pick the set with the fewest rules when the Service is created: which one cannot be told from the cluster; name the set instead", AzureBasic: true}
	default:
		set, origin = mode, AzureLoadBalancerModeAnnotation
	}
	inSet := func(node *v1.Node) bool {
		s, ok := AzureVMSet(node)
		return ok && s != "" && strings.EqualFold(s, set)
	}
	b := Backend{
		Kind: BackendAzureBasic,
		Has: func(node *v1.Node) bool {
			if !inSet(node) {
				return false
			}
			why, unknown := m.Exclusion(node, false)
			return why == "" && unknown == ""
		},
		Why: func(node *v1.Node) string {
			if !inSet(node) {
				return ""
			}
			why, _ := m.Exclusion(node, false)
			return why
		},
		Unknown: func(node *v1.Node) string {
			if !inSet(node) {
				return ""
			}
			_, unknown := m.Exclusion(node, false)
			return unknown
		},
		What:       fmt.Sprintf("availability set / scale set %s (%s)", set, origin),
		AzureBasic: true,
	}
	known := false
	for _, n := range nodes {
		if inSet(n) {
			known = true
			break
		}
	}
	if !known {
		detail := fmt.Sprintf("no node is in availability set / scale set %q (%s)", set, origin)
		if strings.Contains(set, ",") {
			detail += "; cloud-provider-azure takes one set name, not a list"
		}
		b.Undetermined = detail
	}
	return b
}
