package azurelb

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Multiple Standard load balancers (cloud config multipleStandardLoadBalancerConfigurations), as
// cloud-provider-azure places Services and nodes on them (pkg/provider/azure_loadbalancer.go).
// A Local Service's traffic does not depend on the nodes a load balancer is assigned: it gets a
// backend pool of its own holding its endpoints' nodes (BackendOf). A Cluster Service's traffic
// enters through the nodes assigned to its load balancer (the `<clusterName>` backend pool,
// EnsureHostsInPool with the configuration's ActiveNodes) and kube-proxy forwards it to any
// endpoint, so it only matters that some node is assigned.

// Assignment is, per configuration (index into AzureLoadBalancers), whether some node may be
// in its `<clusterName>` backend pool.
type Assignment struct {
	mayHoldNode []bool
}

// AssignNodes works out which configurations nodes may be assigned to. cloud-provider-azure
// (reconcileMultipleStandardLoadBalancerBackendNodes) puts a node whose VM set is a
// configuration's primaryVMSet on that load balancer (accommodateNodesByPrimaryVMSet); any
// other node on one of the configurations whose non-empty nodeSelector matches it, or, if none
// does, one of those without nodeSelector: the one with the fewest nodes, or the one it is
// already on (accommodateNodesByNodeSelector). Which one of several cannot be told, so each of
// them may hold the node. Excluded nodes are left out of every backend pool.
func (m LoadBalancerModel) AssignNodes(nodes []*v1.Node) *Assignment {
	a := &Assignment{mayHoldNode: make([]bool, len(m.AzureLoadBalancers))}
	knownSets := map[string]bool{}
	for _, n := range nodes {
		if set, ok := AzureVMSet(n); ok && set != "" {
			knownSets[strings.ToLower(set)] = true
		}
	}
	for _, n := range nodes {
		if why, _ := m.Exclusion(n, true); why != "" {
			continue
		}
		for _, i := range m.LoadBalancersOf(n, knownSets) {
			a.mayHoldNode[i] = true
		}
	}
	return a
}

// LoadBalancersOf returns the configurations a node may be assigned to.
func (m LoadBalancerModel) LoadBalancersOf(node *v1.Node, knownSets map[string]bool) []int {
	set, known := AzureVMSet(node)
	if known && set != "" {
		for i, lb := range m.AzureLoadBalancers {
			if strings.EqualFold(lb.PrimaryVMSet, set) {
				return []int{i}
			}
		}
	}
	var out []int
	if !known {
		// Its set cannot be told: any primaryVMSet no node is known to be in may be its set.
		for i, lb := range m.AzureLoadBalancers {
			if !knownSets[strings.ToLower(lb.PrimaryVMSet)] {
				out = append(out, i)
			}
		}
	}
	var bySelector []int
	for i, lb := range m.AzureLoadBalancers {
		if !emptySelector(lb.NodeSelector) && matches(lb.NodeSelector, node.Labels) {
			bySelector = append(bySelector, i)
		}
	}
	if len(bySelector) == 0 {
		for i, lb := range m.AzureLoadBalancers {
			if emptySelector(lb.NodeSelector) {
				bySelector = append(bySelector, i)
			}
		}
	}
	return append(out, bySelector...)
}

// emptySelector is cloud-provider-azure's isEmptyLabelSelector.
func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// matches applies a selector Validate accepted.
func matches(s *metav1.LabelSelector, set map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(set))
}

// Placement returns the configurations a Service may be on, as cloud-provider-azure's
// getEligibleLoadBalancersForService filters them: the ones the
// service.beta.kubernetes.io/azure-load-balancer-configurations annotation names (all without
// it); not those with allowServicePlacement false unless the Service is already on them; those
// whose serviceLabelSelector and serviceNamespaceSelector (where set) match; and, if some
// selector matched, not those without selectors. getMostEligibleLBForService then keeps the one
// the Service is on, or takes one without rules or the one with the fewest: with two or more
// eligible, which one cannot be told. problem says why cloud-provider-azure places it nowhere,
// or why the namespace selectors cannot be applied.
func (m LoadBalancerModel) Placement(svc *v1.Service, namespaceLabels map[string]map[string]string) (possible []int, how, problem string) {
	var names []string
	for key, value := range svc.Annotations {
		if strings.EqualFold(key, AzureLoadBalancerConfigurationsAnnotation) {
			for _, n := range strings.Split(value, ",") {
				names = append(names, strings.ToLower(strings.TrimSpace(n)))
			}
		}
	}
	var base []int
	how = "every configuration is eligible without " + AzureLoadBalancerConfigurationsAnnotation
	if len(names) > 0 {
		how = AzureLoadBalancerConfigurationsAnnotation
		for i, lb := range m.AzureLoadBalancers {
			for _, n := range names {
				if n == strings.ToLower(lb.Name) {
					base = append(base, i)
					break
				}
			}
		}
		if len(base) == 0 {
			return nil, how, fmt.Sprintf("%s names no load balancer of multipleStandardLoadBalancerConfigurations (%s): cloud-provider-azure refuses to place the Service (an event on it says so)",
				AzureLoadBalancerConfigurationsAnnotation, strings.Join(m.LoadBalancerNames(nil), ", "))
		}
	} else {
		for i := range m.AzureLoadBalancers {
			base = append(base, i)
		}
	}
	eligible := func(inUse int) ([]int, string) {
		var kept []int
		selectorMatched := false
		for _, i := range base {
			lb := m.AzureLoadBalancers[i]
			if lb.AllowServicePlacement != nil && !*lb.AllowServicePlacement && i != inUse {
				continue
			}
			if lb.ServiceLabelSelector != nil {
				if !matches(lb.ServiceLabelSelector, svc.Labels) {
					continue
				}
				selectorMatched = true
			}
			if lb.ServiceNamespaceSelector != nil {
				if namespaceLabels == nil {
					return nil, fmt.Sprintf("load balancer %s selects Services by namespace, and the namespaces' labels were not read", lb.Name)
				}
				if !matches(lb.ServiceNamespaceSelector, namespaceLabels[svc.Namespace]) {
					continue
				}
				selectorMatched = true
			}
			kept = append(kept, i)
		}
		if selectorMatched {
			out := kept[:0]
			for _, i := range kept {
				if lb := m.AzureLoadBalancers[i]; lb.ServiceLabelSelector != nil || lb.ServiceNamespaceSelector != nil {
					out = append(out, i)
				}
			}
			kept = out
		}
		return kept, ""
	}
	possible, problem = eligible(-1)
	if problem != "" {
		return nil, how, problem
	}
	// A Service already on a load balancer that no longer allows placement stays there if it
	// is still eligible; whether it is on one cannot be told.
	for _, i := range base {
		if lb := m.AzureLoadBalancers[i]; lb.AllowServicePlacement != nil && !*lb.AllowServicePlacement {
			if kept, _ := eligible(i); containsInt(kept, i) && !containsInt(possible, i) {
				possible = append(possible, i)
			}
		}
	}
	sort.Ints(possible)
	if len(possible) == 0 {
		return nil, how, fmt.Sprintf("no load balancer of %s is eligible (allowServicePlacement, serviceLabelSelector, serviceNamespaceSelector): cloud-provider-azure refuses to place the Service (an event on it says so)",
			strings.Join(m.LoadBalancerNames(base), ", "))
	}
	return possible, how, ""
}

// Unassigned reports a Cluster-traffic Service that may be on a load balancer no
// node is assigned to. Its `<clusterName>` backend pool then holds the load balancer's
// ActiveNodes, none: no node, so no traffic. But EnsureHostsInPool filters by ActiveNodes only
// once cloud-provider-azure has recorded a set for the load balancer (at its start, from the
// existing pool, or when it first assigned a node); before that it adds every node. Which of
// the two holds cannot be told from the cluster: listed as undetermined, with the fix.
func (m LoadBalancerModel) Unassigned(svc *v1.Service, namespaceLabels map[string]map[string]string, a *Assignment) (detail, fix string, ok bool) {
	possible, how, problem := m.Placement(svc, namespaceLabels)
	if problem != "" {
		return problem, "", true
	}
	var empty, held []int
	for _, i := range possible {
		if a.mayHoldNode[i] {
			held = append(held, i)
		} else {
			empty = append(empty, i)
		}
	}
	if len(empty) == 0 {
		return "", "", false
	}
	where := fmt.Sprintf("on load balancer %s (%s)", m.AzureLoadBalancers[empty[0]].Name, how)
	if len(possible) > 1 {
		where = fmt.Sprintf("on one of %s (%s; which one cannot be told), among them %s", strings.Join(m.LoadBalancerNames(possible), ", "), how, strings.Join(m.LoadBalancerNames(empty), ", "))
	}
	detail = fmt.Sprintf("externalTrafficPolicy Cluster, %s, to which cloud-provider-azure assigns no node (no node it does not exclude is in its primaryVMSet or falls to it by nodeSelector): its backend pool is empty and the Service gets no traffic, unless cloud-provider-azure has not recorded the load balancer's nodes yet (then it holds every node); which cannot be told from the cluster", where)
	fix = "give " + strings.Join(m.LoadBalancerNames(empty), ", ") + " nodes (a node of its primaryVMSet, or a nodeSelector selecting nodes no other primaryVMSet claims)"
	if len(held) == 0 {
		// The load balancers the Service could be annotated onto.
		other := svc.DeepCopy()
		for key := range other.Annotations {
			if strings.EqualFold(key, AzureLoadBalancerConfigurationsAnnotation) {
				delete(other.Annotations, key)
			}
		}
		if all, _, problem := m.Placement(other, namespaceLabels); problem == "" {
			for _, i := range all {
				if a.mayHoldNode[i] {
					held = append(held, i)
				}
			}
		}
	}
	if len(held) > 0 {
		fix = fmt.Sprintf("annotate the Service %s: %s (assigned nodes), or %s", AzureLoadBalancerConfigurationsAnnotation, strings.Join(m.LoadBalancerNames(held), ","), fix)
	}
	return detail, fix, true
}

// LoadBalancerNames names the configurations idx (all with nil).
func (m LoadBalancerModel) LoadBalancerNames(idx []int) []string {
	var out []string
	if idx == nil {
		for _, lb := range m.AzureLoadBalancers {
			out = append(out, lb.Name)
		}
		return out
	}
	for _, i := range idx {
		out = append(out, m.AzureLoadBalancers[i].Name)
	}
	return out
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
