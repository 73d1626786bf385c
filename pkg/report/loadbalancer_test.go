package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
)

// Today's AKS names: the node resource group MC_<group>_<cluster>_<region>, an 8-digit hash.
const (
	aksRG   = "mc_rg_cluster_westeurope"
	aksHash = "31415926"
	aksSub  = "00000000-0000-0000-0000-000000000000"
)

// scaleSetNode is instance i of an AKS Uniform scale set pool: node and computer name
// aks-<pool>-<hash>-vmss<6 base-36 digits>, providerID naming the scale set.
func scaleSetNode(pool string, i int, extra ...string) *v1.Node {
	vmss := fmt.Sprintf("aks-%s-%s-vmss", pool, aksHash)
	name := fmt.Sprintf("%s%06d", vmss, i)
	mode := "user"
	if pool == "system" {
		mode = "system"
	}
	n := st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", pool).Label("kubernetes.azure.com/mode", mode).
		Label("kubernetes.io/hostname", name).Label("kubernetes.azure.com/cluster", aksRG)
	for j := 0; j+1 < len(extra); j += 2 {
		n.Label(extra[j], extra[j+1])
	}
	node := n.Obj()
	node.Spec.ProviderID = fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s/virtualMachines/%d", aksSub, aksRG, vmss, i)
	return node
}

// vmsNode is VM i of an AKS Virtual Machines node pool: standalone VMs named
// aks-<pool>-<hash>-vms<i> (cluster-autoscaler azure_vms_pool.go), providerID naming the VM.
func vmsNode(pool string, i int) *v1.Node {
	name := fmt.Sprintf("aks-%s-%s-vms%d", pool, aksHash, i)
	node := st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", pool).Label("kubernetes.azure.com/mode", "user").
		Label("kubernetes.io/hostname", name).Obj()
	node.Spec.ProviderID = fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s", aksSub, aksRG, name)
	return node
}

func lbService(name string, policy v1.ServiceExternalTrafficPolicy, svcLabels, annotations map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: svcLabels, Annotations: annotations},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: policy,
			Selector: map[string]string{"app": name}},
	}
}

// podsOn binds n pods of app to each node, in order.
func podsOn(app string, nodes []*v1.Node, n ...int) []*v1.Pod {
	var pods []*v1.Pod
	for i, node := range nodes {
		for j := 0; j < n[i]; j++ {
			pods = append(pods, boundPod(fmt.Sprintf("%s-%d-%d", app, i, j), node.Name, nil, map[string]string{"app": app}))
		}
	}
	return pods
}

// TestStandardLoadBalancerExclusions: the nodes cloud-provider-azure keeps out of a Standard
// load balancer's backend pool, each with the endpoint that then gets no traffic.
func TestStandardLoadBalancerExclusions(t *testing.T) {
	standard := azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard, AzureResourceGroup: aksRG}
	nodeIP := standard
	nodeIP.AzureBackendPoolType = azurelb.BackendPoolNodeIP
	keepCP := standard
	keepCP.AzureExcludeMasterFromStandardLB = ptr.To(false)
	noRG := standard
	noRG.AzureResourceGroup = ""
	const target = "aks-user-31415926-vmss000000"
	excluded := func(why string) []Finding {
		return []Finding{{Object: "default/web", Node: target,
			Detail: "endpoint on node " + target + " (pool user, set aks-user-31415926-vmss), outside the load balancer's backend pool: every node cloud-provider-azure does not exclude (Standard SKU); this node is excluded: " + why + "; it receives no traffic",
			Fix:    "keep the Service's pods off the nodes cloud-provider-azure excludes from load balancers: here " + why,
		}}
	}
	tests := []struct {
		name             string
		model            azurelb.LoadBalancerModel
		labels           []string
		wantMismatches   []Finding
		wantUndetermined []string // nodes
	}{
		{name: "an ordinary node", model: standard},
		{name: "exclusion label, any value", model: standard, labels: []string{azurelb.ExcludeFromLoadBalancersLabel, "false"},
			wantMismatches: excluded("labelled node.kubernetes.io/exclude-from-external-load-balancers")},
		{name: "unmanaged", model: standard, labels: []string{"kubernetes.azure.com/managed", "false"},
			wantMismatches: excluded("labelled kubernetes.azure.com/managed=false (not managed by cloud-provider-azure)")},
		{name: "managed=true", model: standard, labels: []string{"kubernetes.azure.com/managed", "true"}},
		{name: "another resource group", model: standard, labels: []string{azurelb.AzureResourceGroupLabel, "rg-onprem"},
			wantMismatches: excluded("in resource group rg-onprem, not the cluster's mc_rg_cluster_westeurope (kubernetes.azure.com/resource-group)")},
		{name: "the cluster's resource group, other case", model: standard, labels: []string{azurelb.AzureResourceGroupLabel, "MC_rg_cluster_westeurope"}},
		{name: "resource group label, the cluster's not known", model: noRG, labels: []string{azurelb.AzureResourceGroupLabel, "rg-onprem"},
			wantUndetermined: []string{target}},
		// IP-based pools do not call ShouldNodeExcludedFromLoadBalancer.
		{name: "another resource group, IP-based pool", model: nodeIP, labels: []string{azurelb.AzureResourceGroupLabel, "rg-onprem"}},
		{name: "control plane", model: standard, labels: []string{"node-role.kubernetes.io/control-plane", ""},
			wantMismatches: excluded("a control-plane node")},
		{name: "legacy master role", model: standard, labels: []string{"kubernetes.io/role", "master"},
			wantMismatches: excluded("a control-plane node")},
		{name: "control plane kept: excludeMasterFromStandardLB false", model: keepCP, labels: []string{"node-role.kubernetes.io/control-plane", ""}},
		{name: "control plane, IP-based pool: always excluded", model: func() azurelb.LoadBalancerModel {
			m := nodeIP
			m.AzureExcludeMasterFromStandardLB = ptr.To(false)
			return m
		}(),
			labels: []string{"node-role.kubernetes.io/control-plane", ""}, wantMismatches: excluded("a control-plane node")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*v1.Node{scaleSetNode("user", 0, tt.labels...), scaleSetNode("user", 1), scaleSetNode("system", 0)}
			policy := DefaultPolicy()
			policy.LoadBalancer = tt.model
			r := Compute(Inputs{Nodes: nodes, Pods: podsOn("web", nodes, 1, 1, 0),
				Services: []*v1.Service{lbService("web", v1.ServiceExternalTrafficPolicyLocal, nil, nil)}}, policy)
			if diff := cmp.Diff(tt.wantMismatches, r.LoadBalancerMismatches); diff != "" {
				t.Errorf("mismatches (-want +got):\n%s", diff)
			}
			var undetermined []string
			for _, f := range r.LoadBalancerUndetermined {
				undetermined = append(undetermined, f.Node)
			}
			if diff := cmp.Diff(tt.wantUndetermined, undetermined); diff != "" {
				t.Errorf("undetermined nodes (-want +got):\n%s\n%+v", diff, r.LoadBalancerUndetermined)
			}
		})
	}
}

// multiSLB is two pools' load balancers and a third whose GPU pool has scaled to zero:
// cloud-provider-azure assigns its primaryVMSet's nodes (none) and the nodes its nodeSelector
// selects (none) to it.
func multiSLB() azurelb.LoadBalancerModel {
	return azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard, AzureBackendPoolType: azurelb.BackendPoolNodeIP, AzureResourceGroup: aksRG,
		AzureLoadBalancers: []azurelb.AzureLoadBalancer{
			{Name: "kubernetes", PrimaryVMSet: "aks-system-31415926-vmss"},
			{Name: "lb-user", PrimaryVMSet: "aks-user-31415926-vmss",
				ServiceLabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lb": "user"}}},
			{Name: "lb-gpu", PrimaryVMSet: "aks-gpu-31415926-vmss",
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/agentpool": "gpu"}}},
		}}
}

// TestAzureLoadBalancerNodeAssignment: the load balancers whose `<clusterName>` backend pool may
// hold each node (accommodateNodesByPrimaryVMSet, then accommodateNodesByNodeSelector).
func TestAzureLoadBalancerNodeAssignment(t *testing.T) {
	m := multiSLB()
	m.AzureLoadBalancers = append(m.AzureLoadBalancers,
		// A VM node pool named as its primary: its standalone VMs are in no VM set, so the
		// primaryVMSet never matches and they go by nodeSelector like any other node.
		azurelb.AzureLoadBalancer{Name: "lb-batch", PrimaryVMSet: "aks-batch-31415926-vms"})
	flex := st.MakeNode().Name("flex-0").Obj()
	flex.Spec.ProviderID = "azure:///subscriptions/" + aksSub + "/resourceGroups/" + aksRG + "/providers/Microsoft.Compute/virtualMachines/flex-0"
	nodes := []*v1.Node{scaleSetNode("system", 0), scaleSetNode("user", 0), vmsNode("batch", 0), flex}
	known := map[string]bool{"aks-system-31415926-vmss": true, "aks-user-31415926-vmss": true}
	for _, tt := range []struct {
		node *v1.Node
		want []string
	}{
		{node: nodes[0], want: []string{"kubernetes"}},
		{node: nodes[1], want: []string{"lb-user"}},
		// No nodeSelector matches: every load balancer without one.
		{node: nodes[2], want: []string{"kubernetes", "lb-user", "lb-batch"}},
		// A VM whose set cannot be told (a Flexible scale set, a VM not named by AKS) may be in
		// any primaryVMSet no node is known to be in.
		{node: nodes[3], want: []string{"lb-gpu", "lb-batch", "kubernetes", "lb-user", "lb-batch"}},
	} {
		if diff := cmp.Diff(tt.want, m.LoadBalancerNames(m.LoadBalancersOf(tt.node, known))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.node.Name, diff)
		}
	}
}

// TestMultipleStandardLoadBalancers: with multiple Standard load balancers a Local Service's
// backend pool is its own (the nodes of its endpoints), so a load balancer assigned only system
// nodes does not cut off user pods; a Cluster Service needs its load balancer to be assigned
// some node, and which load balancer it is on may not be told.
func TestMultipleStandardLoadBalancers(t *testing.T) {
	nodes := []*v1.Node{scaleSetNode("system", 0), scaleSetNode("system", 1), scaleSetNode("user", 0), scaleSetNode("user", 1)}
	onKubernetes := map[string]string{azurelb.AzureLoadBalancerConfigurationsAnnotation: "kubernetes"}
	const giveGPU = "give lb-gpu nodes (a node of its primaryVMSet, or a nodeSelector selecting nodes no other primaryVMSet claims)"
	const noNode = "to which cloud-provider-azure assigns no node (no node it does not exclude is in its primaryVMSet or falls to it by nodeSelector): its backend pool is empty and the Service gets no traffic, unless cloud-provider-azure has not recorded the load balancer's nodes yet (then it holds every node); which cannot be told from the cluster"
	tests := []struct {
		name             string
		model            func(m *azurelb.LoadBalancerModel)
		svc              *v1.Service
		namespaces       map[string]map[string]string
		excludeUser1     bool
		wantMismatches   []Finding
		wantUndetermined []Finding
	}{
		{name: "Local Service on the load balancer of system nodes, pods on user nodes",
			svc: lbService("web", v1.ServiceExternalTrafficPolicyLocal, nil, onKubernetes)},
		{name: "Cluster Service on the load balancer of system nodes", svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, nil, onKubernetes)},
		{name: "Cluster Service on the right load balancer by its label", svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, map[string]string{"lb": "user"}, nil)},
		{name: "Cluster Service annotated onto a load balancer assigned no node",
			svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, nil, map[string]string{azurelb.AzureLoadBalancerConfigurationsAnnotation: "lb-gpu"}),
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: "externalTrafficPolicy Cluster, on load balancer lb-gpu (" + azurelb.AzureLoadBalancerConfigurationsAnnotation + "), " + noNode,
				Fix:    "annotate the Service " + azurelb.AzureLoadBalancerConfigurationsAnnotation + ": kubernetes (assigned nodes), or " + giveGPU}}},
		{name: "cannot be told: eligible for a load balancer assigned no node",
			svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, nil, nil),
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: "externalTrafficPolicy Cluster, on one of kubernetes, lb-gpu (every configuration is eligible without " + azurelb.AzureLoadBalancerConfigurationsAnnotation + "; which one cannot be told), among them lb-gpu, " + noNode,
				Fix:    "annotate the Service " + azurelb.AzureLoadBalancerConfigurationsAnnotation + ": kubernetes (assigned nodes), or " + giveGPU}}},
		{name: "cannot be told: already on a drained load balancer?",
			model: func(m *azurelb.LoadBalancerModel) {
				m.AzureLoadBalancers[2].AllowServicePlacement = ptr.To(false)
			},
			svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, nil, nil),
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: "externalTrafficPolicy Cluster, on one of kubernetes, lb-gpu (every configuration is eligible without " + azurelb.AzureLoadBalancerConfigurationsAnnotation + "; which one cannot be told), among them lb-gpu, " + noNode,
				Fix:    "annotate the Service " + azurelb.AzureLoadBalancerConfigurationsAnnotation + ": kubernetes (assigned nodes), or " + giveGPU}}},
		{name: "the namespace selector of the only named load balancer does not match",
			model: func(m *azurelb.LoadBalancerModel) {
				m.AzureLoadBalancers[0].ServiceNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "system"}}
			},
			svc:        lbService("web", v1.ServiceExternalTrafficPolicyCluster, nil, map[string]string{azurelb.AzureLoadBalancerConfigurationsAnnotation: "kubernetes"}),
			namespaces: map[string]map[string]string{"default": {}},
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: "no load balancer of kubernetes is eligible (allowServicePlacement, serviceLabelSelector, serviceNamespaceSelector): cloud-provider-azure refuses to place the Service (an event on it says so)"}}},
		{name: "namespace selector, namespaces not read",
			model: func(m *azurelb.LoadBalancerModel) {
				m.AzureLoadBalancers[1].ServiceNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
			},
			svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, map[string]string{"lb": "user"}, nil),
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: "load balancer lb-user selects Services by namespace, and the namespaces' labels were not read"}}},
		{name: "the annotation names no configured load balancer",
			svc: lbService("web", v1.ServiceExternalTrafficPolicyCluster, nil, map[string]string{azurelb.AzureLoadBalancerConfigurationsAnnotation: "lb-2"}),
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: azurelb.AzureLoadBalancerConfigurationsAnnotation + " names no load balancer of multipleStandardLoadBalancerConfigurations (kubernetes, lb-user, lb-gpu): cloud-provider-azure refuses to place the Service (an event on it says so)"}}},
		{name: "a Local Service no load balancer is eligible for gets none",
			svc: lbService("web", v1.ServiceExternalTrafficPolicyLocal, nil, map[string]string{azurelb.AzureLoadBalancerConfigurationsAnnotation: "lb-2"}),
			wantUndetermined: []Finding{{Object: "default/web",
				Detail: azurelb.AzureLoadBalancerConfigurationsAnnotation + " names no load balancer of multipleStandardLoadBalancerConfigurations (kubernetes, lb-user, lb-gpu): cloud-provider-azure refuses to place the Service (an event on it says so)"}}},
		// Exclusions do not hold in a Local Service's own pool: checkAndApplyLocalServiceBackendPoolUpdates
		// (azure_local_services.go) puts every endpoint's node back, excluded or not.
		{name: "Local Service with an endpoint on an excluded node: its own pool holds it", excludeUser1: true,
			svc: lbService("web", v1.ServiceExternalTrafficPolicyLocal, nil, onKubernetes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := DefaultPolicy()
			policy.LoadBalancer = multiSLB()
			if tt.model != nil {
				tt.model(&policy.LoadBalancer)
			}
			in := nodes
			if tt.excludeUser1 {
				in = append(append([]*v1.Node{}, nodes[:3]...), scaleSetNode("user", 1, azurelb.ExcludeFromLoadBalancersLabel, "true"))
			}
			r := Compute(Inputs{Nodes: in, Pods: podsOn("web", in, 0, 0, 1, 1), Services: []*v1.Service{tt.svc}, NamespaceLabels: tt.namespaces}, policy)
			if diff := cmp.Diff(tt.wantMismatches, r.LoadBalancerMismatches); diff != "" {
				t.Errorf("mismatches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUndetermined, r.LoadBalancerUndetermined); diff != "" {
				t.Errorf("undetermined (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnevenLocalTraffic: the load balancer gives each backend node with a ready endpoint an
// equal share; a Service is reported when its busiest pod gets at least twice the share of its
// least busy one.
func TestUnevenLocalTraffic(t *testing.T) {
	nodes := []*v1.Node{scaleSetNode("user", 0), scaleSetNode("user", 1), scaleSetNode("user", 2)}
	const fix = "spread the pods over nodes: pool-scheduler's DomainSpread does it for its pods (the host dimension, kubernetes.io/hostname); " +
		"for other pods a topologySpreadConstraint on kubernetes.io/hostname (maxSkew 1); " +
		"or externalTrafficPolicy: Cluster, which balances per pod but hides the client's source IP"
	uneven := func(nodes, least, lo int, loShare string, most, hi int, hiShare, ratio string) []Finding {
		return []Finding{{Object: "default/web", Fix: fix, Detail: fmt.Sprintf(
			"Local traffic is balanced per node, not per pod: each of the %d backend nodes with a ready endpoint gets 1/%d of it, split among its pods, so each pod on aks-user-31415926-vmss%06d (%d there) gets %s, each pod on aks-user-31415926-vmss%06d (%d there) %s: %sx as much",
			nodes, nodes, least, lo, loShare, most, hi, hiShare, ratio)}}
	}
	tests := []struct {
		name    string
		perNode []int
		policy  v1.ServiceExternalTrafficPolicy
		exclude bool // the second node is excluded from the backend pool
		slices  bool // endpoints from an EndpointSlice, with not-ready ones
		// dualStack: the same pods in an IPv4 and an IPv6 EndpointSlice
		dualStack bool
		want      []Finding
	}{
		{name: "3 and 1", perNode: []int{3, 1, 0}, want: uneven(2, 1, 1, "50.0%", 0, 3, "16.7%", "3.0")},
		{name: "2 and 1: twice", perNode: []int{2, 1, 0}, want: uneven(2, 1, 1, "50.0%", 0, 2, "25.0%", "2.0")},
		{name: "3 and 2: within 2x", perNode: []int{3, 2, 0}},
		{name: "even", perNode: []int{2, 2, 2}},
		{name: "one node", perNode: []int{4, 0, 0}},
		{name: "three nodes, 4, 2, 1", perNode: []int{4, 2, 1}, want: uneven(3, 2, 1, "33.3%", 0, 4, "8.3%", "4.0")},
		{name: "only backend nodes count", perNode: []int{2, 1, 0}, exclude: true},
		{name: "Cluster traffic is balanced per pod", perNode: []int{3, 1, 0}, policy: v1.ServiceExternalTrafficPolicyCluster},
		{name: "not-ready endpoints get no traffic", perNode: []int{1, 1, 0}, slices: true},
		{name: "dual-stack: each pod counted once", perNode: []int{2, 1, 0}, slices: true, dualStack: true, want: uneven(2, 1, 1, "50.0%", 0, 2, "25.0%", "2.0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]*v1.Node{}, nodes...)
			if tt.exclude {
				in[1] = scaleSetNode("user", 1, azurelb.ExcludeFromLoadBalancersLabel, "")
			}
			policy := DefaultPolicy()
			policy.LoadBalancer = azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard}
			etp := tt.policy
			if etp == "" {
				etp = v1.ServiceExternalTrafficPolicyLocal
			}
			inputs := Inputs{Nodes: in, Pods: podsOn("web", in, tt.perNode...), Services: []*v1.Service{lbService("web", etp, nil, nil)}}
			if tt.slices {
				families := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
				if tt.dualStack {
					families = append(families, discoveryv1.AddressTypeIPv6)
				}
				for _, family := range families {
					es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-" + strings.ToLower(string(family)),
						Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: family}
					pod := 0
					for i, n := range tt.perNode {
						for j := 0; j < n; j++ {
							pod++
							es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(in[i].Name), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
								TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("web-%d", pod)}})
						}
					}
					for j := 0; j < 3; j++ {
						es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{NodeName: ptr.To(in[0].Name), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}})
					}
					inputs.EndpointSlices = append(inputs.EndpointSlices, es)
				}
			}
			r := Compute(inputs, policy)
			if diff := cmp.Diff(tt.want, r.LoadBalancerUnevenTraffic); diff != "" {
				t.Errorf("uneven (-want +got):\n%s", diff)
			}
			if r.NumFindings() != len(tt.want)+len(r.LoadBalancerMismatches)+len(r.WeakSpread) {
				t.Errorf("NumFindings %d does not count the uneven Services: %+v", r.NumFindings(), r)
			}
		})
	}
}
