package report

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// The load-balancer findings of the report; the model of how clouds build a Service's backend
// pool is pkg/azurelb.

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
		if azurelb.IsAzureNode(n) {
			azure = true
			break
		}
	}
	var assigned *azurelb.Assignment
	for _, svc := range in.Services {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		object := svc.Namespace + "/" + svc.Name
		if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
			if azure && policy.LoadBalancer.Multi() && svc.Annotations[azurelb.LoadBalancerPoolsAnnotation] == "" {
				if assigned == nil {
					assigned = policy.LoadBalancer.AssignNodes(in.Nodes)
				}
				if detail, fix, ok := policy.LoadBalancer.Unassigned(svc, in.NamespaceLabels, assigned); ok {
					undetermined = append(undetermined, Finding{Object: object, Detail: detail, Fix: fix})
				}
			}
			continue
		}
		if azure && policy.LoadBalancer.Multi() && svc.Annotations[azurelb.LoadBalancerPoolsAnnotation] == "" {
			// A Local Service that no load balancer is eligible for gets none at all.
			if _, _, problem := policy.LoadBalancer.Placement(svc, in.NamespaceLabels); problem != "" {
				undetermined = append(undetermined, Finding{Object: object, Detail: problem})
				continue
			}
		}
		b := policy.LoadBalancer.BackendOf(svc, azure, nodes, policy.Gate.Identity)
		endpoints := endpointNodes(in, svc)
		if b.Undetermined != "" {
			undetermined = append(undetermined, Finding{Object: object, Detail: b.Undetermined, Fix: fixFor(b, endpoints, nodes, policy)})
			continue
		}
		if b.Has == nil {
			continue
		}
		fix := fixFor(b, endpoints, nodes, policy)
		seen := map[string]bool{}
		for _, nodeName := range endpoints {
			node := nodes[nodeName]
			if node == nil || seen[nodeName] {
				continue
			}
			if why := b.UnknownFor(node); why != "" {
				seen[nodeName] = true
				undetermined = append(undetermined, Finding{Object: object, Node: nodeName,
					Detail: fmt.Sprintf("whether the endpoint on %s is in the load balancer's backend pool (%s) cannot be told: %s", describeNode(node, policy), b.What, why)})
				continue
			}
			if b.Has(node) {
				continue
			}
			detail := fmt.Sprintf("endpoint on %s, outside the load balancer's backend pool: %s", describeNode(node, policy), b.What)
			if b.Why != nil {
				if why := b.Why(node); why != "" {
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
func systemOnlyBackend(in Inputs, svc *v1.Service, b azurelb.Backend, nodes map[string]*v1.Node, policy Policy, fix string) (Finding, bool) {
	if len(svc.Spec.Selector) == 0 {
		return Finding{}, false
	}
	inBackend := 0
	for _, n := range nodes {
		if b.UnknownFor(n) != "" {
			return Finding{}, false
		}
		if !b.Has(n) {
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
		Detail: fmt.Sprintf("the load balancer's backend pool (%s) holds only system nodes, and SystemPoolGuard keeps this Service's %d user pods off them: no endpoint can receive traffic", b.What, len(userPods)),
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
func unevenLocalTraffic(object string, b azurelb.Backend, endpoints []string, nodes map[string]*v1.Node) (Finding, bool) {
	perNode := map[string]int{}
	for _, name := range endpoints {
		if n := nodes[name]; n != nil && b.UnknownFor(n) == "" && b.Has(n) {
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
func fixFor(b azurelb.Backend, endpoints []string, nodes map[string]*v1.Node, policy Policy) string {
	if b.Kind == azurelb.BackendAzureStandard {
		var reasons []string
		seen := map[string]bool{}
		for _, name := range endpoints {
			if node := nodes[name]; node != nil && b.Why != nil {
				if why := b.Why(node); why != "" && !seen[why] {
					seen[why] = true
					reasons = append(reasons, why)
				}
			}
		}
		sort.Strings(reasons)
		if len(reasons) == 0 {
			return "keep the Service's pods on nodes cloud-provider-azure does not exclude (not labelled " + azurelb.ExcludeFromLoadBalancersLabel +
				" or " + azurelb.AzureManagedLabel + "=false, not control-plane nodes, not in another resource group)"
		}
		return "keep the Service's pods off the nodes cloud-provider-azure excludes from load balancers: here " + strings.Join(reasons, "; ")
	}
	counts := map[string]int{}
	for _, name := range endpoints {
		node := nodes[name]
		if node == nil {
			continue
		}
		if b.AzureBasic {
			if set, ok := azurelb.AzureVMSet(node); ok && set != "" {
				counts[set]++
			}
		} else if p, ok := policy.Gate.Identity.PoolOf(node.Labels); ok {
			counts[p]++
		}
	}
	if len(counts) == 0 {
		if b.AzureBasic {
			return "set " + azurelb.AzureLoadBalancerModeAnnotation + " to the availability set or scale set of the pool the Service's pods run in"
		}
		return ""
	}
	best := ""
	for k, c := range counts {
		if best == "" || c > counts[best] || (c == counts[best] && k < best) {
			best = k
		}
	}
	if b.AzureBasic {
		fix := fmt.Sprintf("annotate the Service %s: %s", azurelb.AzureLoadBalancerModeAnnotation, best)
		if len(counts) > 1 {
			fix += fmt.Sprintf(" and keep its pods in that set's pool (they run in %d sets; a Basic load balancer serves one)", len(counts))
		}
		return fix
	}
	if b.Kind == azurelb.BackendPools {
		return fmt.Sprintf("keep the Service's pods in its backend pools, or annotate %s: %s", azurelb.LoadBalancerPoolsAnnotation, best)
	}
	return ""
}

func describeNode(node *v1.Node, policy Policy) string {
	parts := []string{}
	if p, ok := policy.Gate.Identity.PoolOf(node.Labels); ok {
		parts = append(parts, "pool "+p)
	}
	if set, ok := azurelb.AzureVMSet(node); ok && set != "" {
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
