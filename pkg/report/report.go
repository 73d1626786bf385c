// Package report measures placement: pods on nodes whose pool labels were not applied, user pods
// on system pools, workloads with weak fault/update-domain spread, and load balancers whose
// Local-traffic endpoints sit outside their backend pool. poolctl simulate, poolctl audit and the
// tests share it, so a number means the same thing everywhere.
package report

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

// Dimension is a topology dimension, as DomainSpread's: the first of Keys present on a node
// gives its domain; a joint dimension's domain is the tuple with every previous dimension's.
type Dimension struct {
	Name  string   `json:"name"`
	Keys  []string `json:"keys"`
	Joint bool     `json:"joint,omitempty"`
}

// Policy is what the cluster is measured against: build it with NewPolicy from the scheduler's
// args, so the report judges what the scheduler enforces.
type Policy struct {
	Gate       pool.Gate
	System     pool.SystemPolicy
	Dimensions []Dimension
	// LoadBalancer says how the cloud builds load-balancer backend pools.
	LoadBalancer azurelb.LoadBalancerModel
}

// Inputs is a cluster's state.
type Inputs struct {
	Nodes     []*v1.Node
	Pods      []*v1.Pod
	LabelSets *pool.LabelSets
	// LabelSetNamespaces are the gate's (empty: every namespace); UnreadLabelSets the sets
	// ("namespace/name") in other namespaces, which it does not read.
	LabelSetNamespaces []string
	UnreadLabelSets    []string
	Services           []*v1.Service
	EndpointSlices     []*discoveryv1.EndpointSlice
	// OptedIn are the namespaces opted in to pool-scheduler (labelled pool-scheduler.io/enabled
	// and matched by the admission path); SchedulerName is the scheduler they opt in to. A pod
	// there that still names the default scheduler was not admitted.
	OptedIn       map[string]bool
	SchedulerName string
	// NodeAtBinding, if set, returns the node as it was when the pod was bound (the simulator
	// records it); otherwise the node's current state is judged.
	NodeAtBinding func(pod *v1.Pod) *v1.Node
	// NamespaceLabels are the namespaces' labels by name, for load balancers that select
	// Services by namespace (Azure's serviceNamespaceSelector); nil: not read.
	NamespaceLabels map[string]map[string]string
	// PodDisruptionBudgets, for MaintenanceRisks (nil: not read); MaxSurge is the pools' upgrade
	// surge (nil: DefaultMaxSurge).
	PodDisruptionBudgets []*policyv1.PodDisruptionBudget
	MaxSurge             *intstr.IntOrString
}

// Finding is one problem, with what to look at and, where known, what fixes it.
type Finding struct {
	Object string `json:"object"`
	Node   string `json:"node,omitempty"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Workload is the measured spread of one workload (the pods of one controller).
type Workload struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Domains[d] maps the domains of dimension d to the workload's replicas there.
	Domains []map[string]int `json:"domains"`
	// Skew[d] is the replicas of the fullest minus the emptiest domain of dimension d (all
	// domains of the cluster's nodes count, empty ones included).
	Skew []int `json:"skew"`
	// Confined[d]: two or more replicas, all in one domain of dimension d.
	Confined []bool `json:"confined"`
}

// Report is the outcome of Compute.
type Report struct {
	Dimensions             []Dimension `json:"dimensions"`
	PodsOnNotReadyNodes    []Finding   `json:"podsOnNotReadyNodes"`
	UserPodsOnSystemNodes  []Finding   `json:"userPodsOnSystemNodes"`
	WeakSpread             []Finding   `json:"weakSpread"`
	LoadBalancerMismatches []Finding   `json:"loadBalancerMismatches"`
	// LoadBalancerUndetermined are Local-traffic Services whose backend pool cannot be told
	// from the cluster (Azure's __auto__ mode, an unknown primary availability set): not counted
	// as findings.
	LoadBalancerUndetermined []Finding `json:"loadBalancerUndetermined,omitempty"`
	// LoadBalancerUnevenTraffic are Local-traffic Services whose pods get uneven shares of the
	// traffic: the load balancer balances over nodes, and their endpoints are packed unevenly.
	LoadBalancerUnevenTraffic []Finding `json:"loadBalancerUnevenTraffic,omitempty"`
	// NotAdmitted are pods of opted-in namespaces that the admission path did not give to
	// pool-scheduler: created before the namespace opted in, or while the webhook was down.
	NotAdmitted []Finding `json:"notAdmitted,omitempty"`
	// LabelSetMismatches are NodePoolLabelSets the gate does not read and pools labelled from
	// sets it does not see (LabelSetFindings).
	LabelSetMismatches []Finding `json:"labelSetMismatches,omitempty"`
	// StartupTaintLong are nodes carrying pool-labeler's startup taint longer than they should
	// (StartupTaints), with why; the caller fills them in (they need the labeler's Lease).
	StartupTaintLong []Finding  `json:"startupTaintLong,omitempty"`
	PendingPods      []Finding  `json:"pendingPods"`
	Workloads        []Workload `json:"workloads"`
	// Domains are each pool's distinct domains per dimension; DegenerateDomains the dimensions
	// that cannot spread in a pool (one value for all its nodes): facts, not counted as findings.
	Domains           []PoolDomains `json:"domains"`
	DegenerateDomains []Finding     `json:"degenerateDomains,omitempty"`
	// MaintenanceRisks are workloads an upgrade can take below two thirds of their replicas at
	// once, or whose budgets stop its drains: risks, not counted as findings.
	MaintenanceRisks []Finding `json:"maintenanceRisks,omitempty"`
	// MaintenanceNote says what limited MaintenanceRisks (budgets not read).
	MaintenanceNote string `json:"maintenanceNote,omitempty"`
}

// NumFindings counts every finding that is a violation (pending pods are not).
func (r *Report) NumFindings() int {
	return len(r.PodsOnNotReadyNodes) + len(r.UserPodsOnSystemNodes) + len(r.WeakSpread) + len(r.LoadBalancerMismatches) + len(r.NotAdmitted) +
		len(r.LabelSetMismatches) + len(r.LoadBalancerUnevenTraffic) + len(r.StartupTaintLong)
}

// ConfinedWorkloads counts workloads confined to one domain of dimension d.
func (r *Report) ConfinedWorkloads(d int) int {
	n := 0
	for _, w := range r.Workloads {
		if d < len(w.Confined) && w.Confined[d] {
			n++
		}
	}
	return n
}

// MaxSkew is the largest skew of dimension d over all workloads.
func (r *Report) MaxSkew(d int) int {
	m := 0
	for _, w := range r.Workloads {
		if d < len(w.Skew) && w.Skew[d] > m {
			m = w.Skew[d]
		}
	}
	return m
}

func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// workloadName names the workload of pod p, whose controller is ref: namespace/kind/name.
func workloadName(p *v1.Pod, ref *metav1.OwnerReference) string {
	return fmt.Sprintf("%s/%s/%s", p.Namespace, strings.ToLower(ref.Kind), ref.Name)
}

// Compute measures the cluster.
func Compute(in Inputs, policy Policy) *Report {
	if policy.Dimensions == nil {
		policy.Dimensions = DefaultPolicy().Dimensions
	}
	r := &Report{Dimensions: policy.Dimensions}
	nodes := make(map[string]*v1.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	if in.LabelSets == nil {
		in.LabelSets = pool.EmptyLabelSets
	}
	r.LabelSetMismatches = LabelSetFindings(policy.Gate.Identity, in.LabelSetNamespaces, in.UnreadLabelSets, in.LabelSets, in.Nodes)
	// Judged as the scheduler judges: with the pools labelled from sets it does not see.
	in.LabelSets = in.LabelSets.WithLabelledPools(pool.LabelledPools(policy.Gate.Identity, in.Nodes,
		func(n *v1.Node) (map[string]string, map[string]string) { return n.Labels, n.Annotations }))
	for _, p := range in.Pods {
		if notAdmitted(in, p) {
			r.NotAdmitted = append(r.NotAdmitted, Finding{Object: podKey(p), Node: p.Spec.NodeName,
				Detail: fmt.Sprintf("schedulerName %q in a namespace opted in to %s", p.Spec.SchedulerName, in.SchedulerName),
				Fix: "created before the namespace opted in, or while the admission webhook was unreachable (it fails open: apiserver_admission_webhook_fail_open_count); " +
					"recreate the pod (kubectl rollout restart its workload)"})
		}
		if p.Spec.NodeName == "" {
			if p.DeletionTimestamp == nil {
				r.PendingPods = append(r.PendingPods, Finding{Object: podKey(p), Detail: pendingReason(p)})
			}
			continue
		}
		node := nodes[p.Spec.NodeName]
		if in.NodeAtBinding != nil {
			if n := in.NodeAtBinding(p); n != nil {
				node = n
			}
		}
		if node == nil {
			continue
		}
		if v := policy.Gate.Check(node.Labels, node.Annotations, in.LabelSets); !v.Ready() {
			detail := v.Cause.String()
			if v.Key != "" {
				detail += fmt.Sprintf(" (pool %q, label %s)", v.Pool, v.Key)
			}
			r.PodsOnNotReadyNodes = append(r.PodsOnNotReadyNodes, Finding{Object: podKey(p), Node: node.Name, Detail: detail})
		}
		if current := nodes[p.Spec.NodeName]; current != nil && policy.System.ClassifyNode(current.Labels) != pool.NotSystemNode && !policy.System.IsSystemPod(p) {
			r.UserPodsOnSystemNodes = append(r.UserPodsOnSystemNodes, Finding{Object: podKey(p), Node: current.Name, Detail: "user pod on a system node"})
		}
	}
	r.Workloads = workloads(in.Pods, nodes, policy)
	r.Domains = PoolDomainsOf(policy.Gate.Identity, policy.Dimensions, in.Nodes)
	r.DegenerateDomains = DegenerateDomains(r.Domains)
	for _, w := range r.Workloads {
		var problems []string
		for d, dim := range policy.Dimensions {
			if w.Confined[d] {
				problems = append(problems, fmt.Sprintf("all %d replicas in one %s", w.Replicas, dim.Name))
			} else if w.Skew[d] > 1 {
				problems = append(problems, fmt.Sprintf("%s skew %d", dim.Name, w.Skew[d]))
			}
		}
		if len(problems) > 0 {
			r.WeakSpread = append(r.WeakSpread, Finding{Object: w.Name, Detail: strings.Join(problems, ", ")})
		}
	}
	r.LoadBalancerMismatches, r.LoadBalancerUndetermined, r.LoadBalancerUnevenTraffic = loadBalancerFindings(in, nodes, policy)
	surge := DefaultMaxSurge
	if in.MaxSurge != nil {
		surge = *in.MaxSurge
	}
	r.MaintenanceRisks = MaintenanceRisks(policy.Gate.Identity, in.Nodes, in.Pods, in.PodDisruptionBudgets, surge)
	sortFindings(r.PodsOnNotReadyNodes, r.UserPodsOnSystemNodes, r.WeakSpread, r.LoadBalancerMismatches, r.LoadBalancerUndetermined, r.LoadBalancerUnevenTraffic, r.NotAdmitted, r.PendingPods, r.LabelSetMismatches)
	return r
}

// notAdmitted: a pod of an opted-in namespace that names the default scheduler, which the
// admission path would have changed. Mirror pods and pods that opted out by label are not; a pod
// its creator bound itself (spec.nodeName at creation) cannot be told from one the default
// scheduler bound, and is reported.
func notAdmitted(in Inputs, p *v1.Pod) bool {
	if in.SchedulerName == "" || !in.OptedIn[p.Namespace] || p.DeletionTimestamp != nil {
		return false
	}
	if _, mirror := p.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if p.Labels[profile.NamespaceLabel] == "false" {
		return false
	}
	return p.Spec.SchedulerName == "" || p.Spec.SchedulerName == v1.DefaultSchedulerName
}

func sortFindings(lists ...[]Finding) {
	for _, l := range lists {
		sort.SliceStable(l, func(i, j int) bool {
			if l[i].Object != l[j].Object {
				return l[i].Object < l[j].Object
			}
			return l[i].Node < l[j].Node
		})
	}
}

func pendingReason(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			return c.Message
		}
	}
	return "not scheduled yet"
}

// domainOf returns the node's domain in dimension d: the value of its first key present, or for
// a joint dimension the values of every dimension up to d, joined by "/".
func domainOf(dims []Dimension, d int, labels map[string]string) (string, bool) {
	v, ok := pool.FirstPresentLabel(dims[d].Keys, labels)
	if !ok || !dims[d].Joint {
		return v, ok
	}
	parts := make([]string, 0, d+1)
	for p := 0; p < d; p++ {
		pv, ok := pool.FirstPresentLabel(dims[p].Keys, labels)
		if !ok {
			return "", false
		}
		parts = append(parts, pv)
	}
	return strings.Join(append(parts, v), "/"), true
}

// workloads measures each workload's spread over the domains of the pools it runs in: a
// workload kept to the user pool is not blamed for the system pool's domains.
func workloads(pods []*v1.Pod, nodes map[string]*v1.Node, policy Policy) []Workload {
	dims := policy.Dimensions
	// Domains per pool and dimension.
	poolDomains := map[string][]map[string]bool{}
	for _, n := range nodes {
		p, _ := policy.Gate.Identity.PoolOf(n.Labels)
		if poolDomains[p] == nil {
			poolDomains[p] = make([]map[string]bool, len(dims))
			for d := range dims {
				poolDomains[p][d] = map[string]bool{}
			}
		}
		for d := range dims {
			if v, ok := domainOf(dims, d, n.Labels); ok {
				poolDomains[p][d][v] = true
			}
		}
	}
	type acc struct {
		w     *Workload
		pools map[string]bool
	}
	byOwner := map[string]*acc{}
	var keys []string
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		node := nodes[p.Spec.NodeName]
		if ref == nil || ref.Kind == "DaemonSet" || p.DeletionTimestamp != nil || node == nil {
			continue
		}
		key := fmt.Sprintf("%s/%s/%s@%s", p.Namespace, strings.ToLower(ref.Kind), ref.Name, ref.UID)
		a := byOwner[key]
		if a == nil {
			a = &acc{w: &Workload{Name: workloadName(p, ref), Domains: make([]map[string]int, len(dims))}, pools: map[string]bool{}}
			for d := range dims {
				a.w.Domains[d] = map[string]int{}
			}
			byOwner[key] = a
			keys = append(keys, key)
		}
		a.w.Replicas++
		pl, _ := policy.Gate.Identity.PoolOf(node.Labels)
		a.pools[pl] = true
		for d := range dims {
			if v, ok := domainOf(dims, d, node.Labels); ok {
				a.w.Domains[d][v]++
			}
		}
	}
	out := make([]Workload, 0, len(byOwner))
	for _, key := range keys {
		a := byOwner[key]
		w := a.w
		w.Skew = make([]int, len(dims))
		w.Confined = make([]bool, len(dims))
		for d := range dims {
			// Every domain of the workload's pools, an empty one at 0.
			all := map[string]int{}
			for p := range a.pools {
				for v := range poolDomains[p][d] {
					all[v] = w.Domains[d][v]
				}
			}
			if len(all) == 0 {
				continue
			}
			w.Skew[d] = spread.Skew(all)
			w.Confined[d] = w.Replicas >= 2 && len(all) > 1 && len(w.Domains[d]) == 1
		}
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// endpointNodes returns the nodes of a Service's ready endpoints, from its EndpointSlices, or,
// where none exist (no endpoint controller, as in the simulator), from the bound pods its
// selector matches.
func endpointNodes(in Inputs, svc *v1.Service) []string {
	var nodes []string
	found := false
	// A dual-stack Service has an EndpointSlice per address family, each listing every pod: an
	// endpoint is counted once per pod it targets (without a targetRef, once per entry).
	seen := map[string]bool{}
	for _, es := range in.EndpointSlices {
		if es.Namespace != svc.Namespace || es.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		found = true
		for _, ep := range es.Endpoints {
			if ep.NodeName == nil || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			if ref := ep.TargetRef; ref != nil {
				key := ref.Kind + "/" + ref.Namespace + "/" + ref.Name + "/" + string(ref.UID)
				if seen[key] {
					continue
				}
				seen[key] = true
			}
			nodes = append(nodes, *ep.NodeName)
		}
	}
	if found || len(svc.Spec.Selector) == 0 {
		return nodes
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	for _, p := range in.Pods {
		if p.Namespace == svc.Namespace && p.Spec.NodeName != "" && p.DeletionTimestamp == nil && selector.Matches(labels.Set(p.Labels)) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return nodes
}
