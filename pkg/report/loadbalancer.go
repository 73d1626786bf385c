package report

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Load-balancer annotations naming the backend of a Service.
const (
	// AzureLoadBalancerModeAnnotation names the availability set or scale set whose load
	// balancer serves the Service, or __auto__ (cloud-provider-azure, Basic SKU only; a Standard
	// load balancer ignores it).
	AzureLoadBalancerModeAnnotation = "service.beta.kubernetes.io/azure-load-balancer-mode"
	// AzureAutoMode lets cloud-provider-azure pick the set with the fewest load-balancing rules.
	AzureAutoMode = "__auto__"
	// LoadBalancerPoolsAnnotation is pool-scheduler's provider-neutral annotation: the pools
	// (comma-separated pool names) behind the Service's load balancer, for clouds the audit
	// does not model.
	LoadBalancerPoolsAnnotation = "pool-scheduler.io/load-balancer-pools"
	// ExcludeFromLoadBalancersLabel keeps a node out of every load balancer's backend pool.
	ExcludeFromLoadBalancersLabel = v1.LabelNodeExcludeBalancers
	// azureManagedLabel "false" marks nodes cloud-provider-azure does not manage (on-premises
	// nodes): never in a backend pool.
	azureManagedLabel = "kubernetes.azure.com/managed"
)

// Azure load balancer SKUs.
const (
	SKUStandard = "Standard"
	SKUBasic    = "Basic"
)

// LoadBalancerModel is how the cloud builds a load balancer's backend pool. Only Azure is
// modelled; elsewhere only LoadBalancerPoolsAnnotation says what the backend is.
type LoadBalancerModel struct {
	// AzureSKU is Standard (the default on AKS; AKS retired Basic on 2025-09-30) or Basic.
	AzureSKU string
	// AzurePrimaryVMSet is cloud-provider-azure's primaryAvailabilitySetName or
	// primaryScaleSetName: the backend of a Basic load balancer without the mode annotation.
	AzurePrimaryVMSet string
}

var (
	// azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachineScaleSets/<vmss>/virtualMachines/<id>
	vmssProviderID = regexp.MustCompile(`(?i)^azure:///subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/virtualMachineScaleSets/([^/]+)/virtualMachines/[^/]+$`)
	// azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<vm>
	vmProviderID = regexp.MustCompile(`(?i)^azure:///subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/virtualMachines/([^/]+)$`)
	// AKS (AgentBaker, aks-engine) names availability-set VMs aks-<pool>-<8-digit cluster hash>-<index>
	// and their set <pool>-availabilitySet-<hash>.
	aksVMName = regexp.MustCompile(`^aks-([a-z0-9][a-z0-9-]*)-([0-9]{8})-([0-9]+)$`)
)

// AzureVMSet returns the availability set or scale set a node belongs to: the scale set from
// its providerID, or, for a VM outside scale sets, the availability set AKS names after the
// VM's pool and cluster hash. ok is false for nodes that are not Azure VMs or whose set cannot
// be told from the node (cloud-provider-azure asks Azure's API; the audit does not).
func AzureVMSet(node *v1.Node) (string, bool) {
	if m := vmssProviderID.FindStringSubmatch(node.Spec.ProviderID); m != nil {
		return m[1], true
	}
	m := vmProviderID.FindStringSubmatch(node.Spec.ProviderID)
	if m == nil {
		return "", false
	}
	if n := aksVMName.FindStringSubmatch(strings.ToLower(m[1])); n != nil {
		return n[1] + "-availabilitySet-" + n[2], true
	}
	return "", false
}

func isAzureNode(node *v1.Node) bool {
	return strings.HasPrefix(strings.ToLower(node.Spec.ProviderID), "azure://")
}

// excludedFromLoadBalancers mirrors cloud-provider-azure's ShouldNodeExcludedFromLoadBalancer
// (the exclusion label, unmanaged nodes) and, for Standard load balancers, its exclusion of
// control-plane nodes (excludeMasterFromStandardLB, default true).
func excludedFromLoadBalancers(node *v1.Node, standard bool) bool {
	if _, ok := node.Labels[ExcludeFromLoadBalancersLabel]; ok {
		return true
	}
	if strings.EqualFold(node.Labels[azureManagedLabel], "false") {
		return true
	}
	if standard {
		_, cp := node.Labels["node-role.kubernetes.io/control-plane"]
		_, master := node.Labels["node-role.kubernetes.io/master"]
		return cp || master || node.Labels["kubernetes.io/role"] == "master"
	}
	return false
}

// backend is a Service's load-balancer backend pool as far as it can be told.
type backend struct {
	// has reports whether a node is in the backend pool; nil: every node is (not modelled).
	has func(node *v1.Node) bool
	// what describes the backend pool for messages.
	what string
	// undetermined, if not empty, says why the backend cannot be told.
	undetermined string
	// azureBasic: the fix is to name one availability set or scale set.
	azureBasic bool
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
	if !strings.EqualFold(m.AzureSKU, SKUBasic) {
		return backend{
			has:  func(node *v1.Node) bool { return !excludedFromLoadBalancers(node, true) },
			what: "every node not labelled " + ExcludeFromLoadBalancersLabel + " (Standard SKU)",
		}
	}
	mode, annotated := svc.Annotations[AzureLoadBalancerModeAnnotation]
	mode = strings.TrimSpace(mode)
	var set, origin string
	switch {
	case !annotated || mode == "":
		if m.AzurePrimaryVMSet == "" {
			return backend{undetermined: "Basic SKU without " + AzureLoadBalancerModeAnnotation + ": the backend is the primary availability set or scale set, which is not known (poolctl audit --azure-primary-vmset)", azureBasic: true}
		}
		set, origin = m.AzurePrimaryVMSet, "the primary set, Basic SKU without "+AzureLoadBalancerModeAnnotation
	case strings.EqualFold(mode, AzureAutoMode):
		return backend{undetermined: AzureAutoMode + " lets cloud-provider-azure pick the set with the fewest rules when the Service is created: which one cannot be told from the cluster; name the set instead", azureBasic: true}
	default:
		set, origin = mode, AzureLoadBalancerModeAnnotation
	}
	b := backend{
		has: func(node *v1.Node) bool {
			s, ok := AzureVMSet(node)
			return ok && strings.EqualFold(s, set) && !excludedFromLoadBalancers(node, false)
		},
		what:       fmt.Sprintf("availability set / scale set %s (%s)", set, origin),
		azureBasic: true,
	}
	known := false
	for _, n := range nodes {
		if s, ok := AzureVMSet(n); ok && strings.EqualFold(s, set) {
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
// traffic and the rest get all of it), and those whose backend pool holds only system nodes
// while the guard keeps their (user) pods off them: no endpoint can receive traffic.
func loadBalancerFindings(in Inputs, nodes map[string]*v1.Node, policy Policy) (mismatches, undetermined []Finding) {
	azure := policy.LoadBalancer.AzureSKU != ""
	for _, n := range in.Nodes {
		if isAzureNode(n) {
			azure = true
			break
		}
	}
	for _, svc := range in.Services {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
			continue
		}
		object := svc.Namespace + "/" + svc.Name
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
		for _, nodeName := range endpoints {
			node := nodes[nodeName]
			if node == nil || b.has(node) {
				continue
			}
			mismatches = append(mismatches, Finding{
				Object: object, Node: nodeName,
				Detail: fmt.Sprintf("endpoint on %s, outside the load balancer's backend pool: %s; it receives no traffic", describeNode(node, policy), b.what),
				Fix:    fix,
			})
		}
		if f, ok := systemOnlyBackend(in, svc, b, nodes, policy, fix); ok {
			mismatches = append(mismatches, f)
		}
	}
	return mismatches, undetermined
}

// systemOnlyBackend reports a Service whose backend nodes are all system nodes while its pods
// are user pods, which the guard keeps off system nodes.
func systemOnlyBackend(in Inputs, svc *v1.Service, b backend, nodes map[string]*v1.Node, policy Policy, fix string) (Finding, bool) {
	if len(svc.Spec.Selector) == 0 {
		return Finding{}, false
	}
	inBackend := 0
	for _, n := range nodes {
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

// fixFor suggests what makes the endpoints receive traffic. For a Basic Azure load balancer:
// the mode annotation naming the availability set or scale set that holds most endpoints (a
// Basic load balancer has one set behind it). Elsewhere: the nodes to keep the pods on.
func fixFor(b backend, endpoints []string, nodes map[string]*v1.Node, policy Policy) string {
	counts := map[string]int{}
	for _, name := range endpoints {
		node := nodes[name]
		if node == nil {
			continue
		}
		if b.azureBasic {
			if set, ok := AzureVMSet(node); ok {
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
	if strings.HasPrefix(b.what, "pools ") {
		return fmt.Sprintf("keep the Service's pods in its backend pools, or annotate %s: %s", LoadBalancerPoolsAnnotation, best)
	}
	return "keep the Service's pods on nodes without " + ExcludeFromLoadBalancersLabel
}

func describeNode(node *v1.Node, policy Policy) string {
	parts := []string{}
	if p, ok := policy.Gate.Identity.PoolOf(node.Labels); ok {
		parts = append(parts, "pool "+p)
	}
	if set, ok := AzureVMSet(node); ok {
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
