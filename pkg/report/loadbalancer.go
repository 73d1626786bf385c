package report

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	// azureManagedLabel "false" marks nodes cloud-provider-azure does not manage (on-premises
	// nodes): never in a backend pool.
	azureManagedLabel = "kubernetes.azure.com/managed"
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

func (m LoadBalancerModel) basic() bool { return strings.EqualFold(m.AzureSKU, SKUBasic) }

// multi: cloud-provider-azure's UseMultipleStandardLoadBalancers.
func (m LoadBalancerModel) multi() bool { return !m.basic() && len(m.AzureLoadBalancers) > 0 }

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

func isAzureNode(node *v1.Node) bool {
	return strings.HasPrefix(strings.ToLower(node.Spec.ProviderID), "azure://")
}

// isControlPlaneNode is cloud-provider-azure's (azure_standard.go).
func isControlPlaneNode(node *v1.Node) bool {
	_, cp := node.Labels["node-role.kubernetes.io/control-plane"]
	_, master := node.Labels["node-role.kubernetes.io/master"]
	return cp || master || node.Labels["kubernetes.io/role"] == "master"
}

// azureExclusion says why cloud-provider-azure keeps the node out of the backend pools of a
// Standard (standard) or Basic load balancer, "" if it does not; unknown says why that cannot
// be told from the cluster.
//   - the exclusion label (any value) and kubernetes.azure.com/managed=false: updateNodeCaches
//     puts the node in excludeLoadBalancerNodes, which ShouldNodeExcludedFromLoadBalancer
//     (NIC-based pools, VMSet.EnsureHostsInPool) and ReconcileBackendPools (IP-based) honour;
//   - control-plane nodes: NIC-based pools exclude them with excludeMasterFromStandardLB
//     (default true), IP-based pools always (backendPoolTypeNodeIP.EnsureHostsInPool);
//   - kubernetes.azure.com/resource-group naming another group than the cloud config's
//     resourceGroup: ShouldNodeExcludedFromLoadBalancer, which only NIC-based pools call.
func (m LoadBalancerModel) azureExclusion(node *v1.Node, standard bool) (why, unknown string) {
	if _, ok := node.Labels[ExcludeFromLoadBalancersLabel]; ok {
		return "labelled " + ExcludeFromLoadBalancersLabel, ""
	}
	if strings.EqualFold(node.Labels[azureManagedLabel], "false") {
		return "labelled " + azureManagedLabel + "=false (not managed by cloud-provider-azure)", ""
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

type backendKind int

const (
	backendAll backendKind = iota // not modelled: every node
	backendPools
	backendAzureStandard
	backendAzureBasic
)

// backend is a Service's load-balancer backend pool as far as it can be told.
type backend struct {
	kind backendKind
	// has reports whether a node is in the backend pool; nil: every node is (not modelled).
	has func(node *v1.Node) bool
	// why, if set, says why a node is not in the pool although it could be (an exclusion).
	why func(node *v1.Node) string
	// unknown, if set and not empty for a node, says why its membership cannot be told.
	unknown func(node *v1.Node) string
	// what describes the backend pool for messages.
	what string
	// undetermined, if not empty, says why the backend cannot be told.
	undetermined string
	// azureBasic: the fix is to name one availability set or scale set.
	azureBasic bool
}

func (b backend) unknownFor(node *v1.Node) string {
	if b.unknown == nil {
		return ""
	}
	return b.unknown(node)
}

func (m LoadBalancerModel) backendOf(svc *v1.Service, azure bool, nodes map[string]*v1.Node, policy Policy) backend {
	if value := svc.Annotations[LoadBalancerPoolsAnnotation]; value != "" {
		pools := map[string]bool{}
		for _, p := range strings.Split(value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				pools[p] = true
			}
		}
		return backend{
			kind: backendPools,
			has: func(node *v1.Node) bool {
				p, _ := policy.Gate.Identity.PoolOf(node.Labels)
				return pools[p]
			},
			what: fmt.Sprintf("pools %s (%s)", strings.Join(sortedKeys(pools), ","), LoadBalancerPoolsAnnotation),
		}
	}
	if !azure {
		return backend{}
	}
	if !m.basic() {
		b := backend{
			kind: backendAzureStandard,
			has: func(node *v1.Node) bool {
				why, unknown := m.azureExclusion(node, true)
				return why == "" && unknown == ""
			},
			why:     func(node *v1.Node) string { why, _ := m.azureExclusion(node, true); return why },
			unknown: func(node *v1.Node) string { _, unknown := m.azureExclusion(node, true); return unknown },
			what:    "every node cloud-provider-azure does not exclude (Standard SKU)",
		}
		if m.multi() {
			// With multiple Standard load balancers a Local Service gets a backend pool of its
			// own, holding the nodes of its endpoints wherever they run
			// (getBackendPoolNameForService, getLocalServiceEndpointsNodeNames): the nodes each
			// load balancer is assigned play no part. Exclusions do not hold there either:
			// checkAndApplyLocalServiceBackendPoolUpdates (azure_local_services.go) puts the IPs
			// of every endpoint's node back (nodePrivateIPs, which excluded nodes are in too)
			// after EnsureHostsInPool took excluded ones out. So every endpoint is a backend.
			b.has, b.why, b.unknown = func(*v1.Node) bool { return true }, nil, nil
			b.what = "the Service's own backend pool, the nodes of its endpoints (multiple Standard load balancers)"
		}
		return b
	}
	mode, annotated := svc.Annotations[AzureLoadBalancerModeAnnotation]
	mode = strings.TrimSpace(mode)
	var set, origin string
	switch {
	case !annotated || mode == "":
		if m.AzurePrimaryVMSet == "" {
			return backend{kind: backendAzureBasic, undetermined: "Basic SKU without " + AzureLoadBalancerModeAnnotation + ": the backend is the primary availability set or scale set, which is not known (poolctl audit --azure-primary-vmset, or --azure-cloud-config)", azureBasic: true}
		}
		set, origin = m.AzurePrimaryVMSet, "the primary set, Basic SKU without "+AzureLoadBalancerModeAnnotation
	case strings.EqualFold(mode, AzureAutoMode):
		return backend{kind: backendAzureBasic, undetermined: AzureAutoMode + " lets cloud-provider-azure pick the set with the fewest rules when the Service is created: which one cannot be told from the cluster; name the set instead", azureBasic: true}
	default:
		set, origin = mode, AzureLoadBalancerModeAnnotation
	}
	inSet := func(node *v1.Node) bool {
		s, ok := AzureVMSet(node)
		return ok && s != "" && strings.EqualFold(s, set)
	}
	b := backend{
		kind: backendAzureBasic,
		has: func(node *v1.Node) bool {
			if !inSet(node) {
				return false
			}
			why, unknown := m.azureExclusion(node, false)
			return why == "" && unknown == ""
		},
		why: func(node *v1.Node) string {
			if !inSet(node) {
				return ""
			}
			why, _ := m.azureExclusion(node, false)
			return why
		},
		unknown: func(node *v1.Node) string {
			if !inSet(node) {
				return ""
			}
			_, unknown := m.azureExclusion(node, false)
			return unknown
		},
		what:       fmt.Sprintf("availability set / scale set %s (%s)", set, origin),
		azureBasic: true,
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
		b.undetermined = detail
	}
	return b
}

// loadBalancerFindings finds LoadBalancer Services with externalTrafficPolicy Local whose ready
// endpoints sit on nodes outside the load balancer's backend pool (with Local traffic the load
// balancer's health probe fails on nodes without a local endpoint, so those endpoints get no
// traffic and the rest get all of it), those whose backend pool holds only system nodes while
// the guard keeps their (user) pods off them: no endpoint can receive traffic, and those whose
// endpoints are spread so unevenly over nodes that some pods get twice the traffic of others
// (uneven). With multiple Standard Azure load balancers it also lists Services of any traffic
// policy that may sit on a load balancer no node is assigned to (undetermined).
func loadBalancerFindings(in Inputs, nodes map[string]*v1.Node, policy Policy) (mismatches, undetermined, uneven []Finding) {
	azure := policy.LoadBalancer.AzureSKU != ""
	for _, n := range in.Nodes {
		if isAzureNode(n) {
			azure = true
			break
		}
	}
	var assigned *lbAssignment
	for _, svc := range in.Services {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		object := svc.Namespace + "/" + svc.Name
		if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
			if azure && policy.LoadBalancer.multi() && svc.Annotations[LoadBalancerPoolsAnnotation] == "" {
				if assigned == nil {
					assigned = policy.LoadBalancer.assignNodes(in.Nodes)
				}
				if f, ok := policy.LoadBalancer.unassignedLoadBalancer(svc, in.NamespaceLabels, assigned); ok {
					undetermined = append(undetermined, f)
				}
			}
			continue
		}
		if azure && policy.LoadBalancer.multi() && svc.Annotations[LoadBalancerPoolsAnnotation] == "" {
			// A Local Service that no load balancer is eligible for gets none at all.
			if _, _, problem := policy.LoadBalancer.placement(svc, in.NamespaceLabels); problem != "" {
				undetermined = append(undetermined, Finding{Object: object, Detail: problem})
				continue
			}
		}
		b := policy.LoadBalancer.backendOf(svc, azure, nodes, policy)
		endpoints := endpointNodes(in, svc)
		if b.undetermined != "" {
			undetermined = append(undetermined, Finding{Object: object, Detail: b.undetermined, Fix: fixFor(b, endpoints, nodes, policy)})
			continue
		}
		if b.has == nil {
			continue
		}
		fix := fixFor(b, endpoints, nodes, policy)
		seen := map[string]bool{}
		for _, nodeName := range endpoints {
			node := nodes[nodeName]
			if node == nil || seen[nodeName] {
				continue
			}
			if why := b.unknownFor(node); why != "" {
				seen[nodeName] = true
				undetermined = append(undetermined, Finding{Object: object, Node: nodeName,
					Detail: fmt.Sprintf("whether the endpoint on %s is in the load balancer's backend pool (%s) cannot be told: %s", describeNode(node, policy), b.what, why)})
				continue
			}
			if b.has(node) {
				continue
			}
			detail := fmt.Sprintf("endpoint on %s, outside the load balancer's backend pool: %s", describeNode(node, policy), b.what)
			if b.why != nil {
				if why := b.why(node); why != "" {
					detail += "; this node is excluded: " + why
				}
			}
			mismatches = append(mismatches, Finding{Object: object, Node: nodeName, Detail: detail + "; it receives no traffic", Fix: fix})
		}
		if f, ok := systemOnlyBackend(in, svc, b, nodes, policy, fix); ok {
			mismatches = append(mismatches, f)
		}
		if f, ok := unevenLocalTraffic(object, b, endpoints, nodes); ok {
			uneven = append(uneven, f)
		}
	}
	return mismatches, undetermined, uneven
}

// systemOnlyBackend reports a Service whose backend nodes are all system nodes while its pods
// are user pods, which the guard keeps off system nodes.
func systemOnlyBackend(in Inputs, svc *v1.Service, b backend, nodes map[string]*v1.Node, policy Policy, fix string) (Finding, bool) {
	if len(svc.Spec.Selector) == 0 {
		return Finding{}, false
	}
	inBackend := 0
	for _, n := range nodes {
		if b.unknownFor(n) != "" {
			return Finding{}, false
		}
		if !b.has(n) {
			continue
		}
		if policy.System.ClassifyNode(n.Labels) == pool.NotSystemNode {
			return Finding{}, false
		}
		inBackend++
	}
	if inBackend == 0 {
		return Finding{}, false
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	var userPods []string
	for _, p := range in.Pods {
		if p.Namespace != svc.Namespace || p.DeletionTimestamp != nil || !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		if policy.System.IsSystemPod(p) {
			return Finding{}, false
		}
		userPods = append(userPods, p.Name)
	}
	if len(userPods) == 0 {
		return Finding{}, false
	}
	return Finding{
		Object: svc.Namespace + "/" + svc.Name,
		Detail: fmt.Sprintf("the load balancer's backend pool (%s) holds only system nodes, and SystemPoolGuard keeps this Service's %d user pods off them: no endpoint can receive traffic", b.what, len(userPods)),
		Fix:    fix,
	}, true
}

// unevenLocalTraffic reports a Local-traffic Service whose busiest pod gets at least twice the
// traffic of its least busy one. The load balancer balances over backend nodes, not pods: each
// node whose health probe passes (one with a ready local endpoint) gets an equal share, which
// kube-proxy splits among that node's endpoints (Kubernetes, "Caveats and limitations when
// preserving source IPs"; Azure Load Balancer hashes flows over healthy backend instances and has
// no weights, and cloud-provider-azure puts one entry per node in the pool). So with N nodes, a
// pod sharing its node with k-1 others gets 1/(N·k): the ratio between the busiest and least
// busy pod is max k / min k.
func unevenLocalTraffic(object string, b backend, endpoints []string, nodes map[string]*v1.Node) (Finding, bool) {
	perNode := map[string]int{}
	for _, name := range endpoints {
		if n := nodes[name]; n != nil && b.unknownFor(n) == "" && b.has(n) {
			perNode[name]++
		}
	}
	if len(perNode) < 2 {
		return Finding{}, false
	}
	names := make([]string, 0, len(perNode))
	for name := range perNode {
		names = append(names, name)
	}
	sort.Strings(names)
	most, least := names[0], names[0]
	for _, name := range names {
		if perNode[name] > perNode[most] {
			most = name
		}
		if perNode[name] < perNode[least] {
			least = name
		}
	}
	hi, lo, n := perNode[most], perNode[least], len(perNode)
	if hi < 2*lo {
		return Finding{}, false
	}
	share := func(k int) string { return fmt.Sprintf("%.1f%%", 100/float64(n*k)) }
	return Finding{
		Object: object,
		Detail: fmt.Sprintf("Local traffic is balanced per node, not per pod: each of the %d backend nodes with a ready endpoint gets 1/%d of it, split among its pods, so each pod on %s (%d there) gets %s, each pod on %s (%d there) %s: %.1fx as much",
			n, n, least, lo, share(lo), most, hi, share(hi), float64(hi)/float64(lo)),
		Fix: "spread the pods over nodes: pool-scheduler's DomainSpread does it for its pods (the host dimension, kubernetes.io/hostname); " +
			"for other pods a topologySpreadConstraint on kubernetes.io/hostname (maxSkew 1); " +
			"or externalTrafficPolicy: Cluster, which balances per pod but hides the client's source IP",
	}, true
}

// fixFor suggests what makes the endpoints receive traffic. For a Basic Azure load balancer:
// the mode annotation naming the availability set or scale set that holds most endpoints (a
// Basic load balancer has one set behind it). For a Standard one: keeping the pods off the
// nodes it excludes. Elsewhere: the nodes to keep the pods on.
func fixFor(b backend, endpoints []string, nodes map[string]*v1.Node, policy Policy) string {
	if b.kind == backendAzureStandard {
		var reasons []string
		seen := map[string]bool{}
		for _, name := range endpoints {
			if node := nodes[name]; node != nil && b.why != nil {
				if why := b.why(node); why != "" && !seen[why] {
					seen[why] = true
					reasons = append(reasons, why)
				}
			}
		}
		sort.Strings(reasons)
		if len(reasons) == 0 {
			return "keep the Service's pods on nodes cloud-provider-azure does not exclude (not labelled " + ExcludeFromLoadBalancersLabel +
				" or " + azureManagedLabel + "=false, not control-plane nodes, not in another resource group)"
		}
		return "keep the Service's pods off the nodes cloud-provider-azure excludes from load balancers: here " + strings.Join(reasons, "; ")
	}
	counts := map[string]int{}
	for _, name := range endpoints {
		node := nodes[name]
		if node == nil {
			continue
		}
		if b.azureBasic {
			if set, ok := AzureVMSet(node); ok && set != "" {
				counts[set]++
			}
		} else if p, ok := policy.Gate.Identity.PoolOf(node.Labels); ok {
			counts[p]++
		}
	}
	if len(counts) == 0 {
		if b.azureBasic {
			return "set " + AzureLoadBalancerModeAnnotation + " to the availability set or scale set of the pool the Service's pods run in"
		}
		return ""
	}
	best := ""
	for k, c := range counts {
		if best == "" || c > counts[best] || (c == counts[best] && k < best) {
			best = k
		}
	}
	if b.azureBasic {
		fix := fmt.Sprintf("annotate the Service %s: %s", AzureLoadBalancerModeAnnotation, best)
		if len(counts) > 1 {
			fix += fmt.Sprintf(" and keep its pods in that set's pool (they run in %d sets; a Basic load balancer serves one)", len(counts))
		}
		return fix
	}
	if b.kind == backendPools {
		return fmt.Sprintf("keep the Service's pods in its backend pools, or annotate %s: %s", LoadBalancerPoolsAnnotation, best)
	}
	return ""
}

func describeNode(node *v1.Node, policy Policy) string {
	parts := []string{}
	if p, ok := policy.Gate.Identity.PoolOf(node.Labels); ok {
		parts = append(parts, "pool "+p)
	}
	if set, ok := AzureVMSet(node); ok && set != "" {
		parts = append(parts, "set "+set)
	}
	if len(parts) == 0 {
		return "node " + node.Name
	}
	return fmt.Sprintf("node %s (%s)", node.Name, strings.Join(parts, ", "))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
