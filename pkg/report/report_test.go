package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const (
	azurePrefix = "azure:///subscriptions/sub/resourceGroups/mc_rg/providers/Microsoft.Compute/"
	zoneKey     = "topology.kubernetes.io/zone"
	fdKey       = "topology.pool-scheduler.io/fault-domain"
	udKey       = "topology.pool-scheduler.io/update-domain"
)

// asNode is an AKS availability-set VM: aks-<pool>-<hash>-<index>, outside zones, so its zone
// label holds its fault domain (as does pool-labeler's fault-domain label).
func asNode(pool string, i int, fd, ud string, extra ...string) *v1.Node {
	name := fmt.Sprintf("aks-%s-27255451-%d", pool, i)
	n := st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", pool).Label("kubernetes.io/hostname", name).
		Label(zoneKey, fd).Label(fdKey, fd).Label(udKey, ud)
	for j := 0; j+1 < len(extra); j += 2 {
		n.Label(extra[j], extra[j+1])
	}
	node := n.Obj()
	node.Spec.ProviderID = azurePrefix + "virtualMachines/" + name
	return node
}

// vmssNode is an AKS scale-set VM in a zone: the zone label is <region>-<zone>, and pool-labeler
// writes no fault-domain label.
func vmssNode(pool string, i int, zone, ud string) *v1.Node {
	vmss := fmt.Sprintf("aks-%s-27255451-vmss", pool)
	name := fmt.Sprintf("%s%06d", vmss, i)
	node := st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", pool).Label("kubernetes.io/hostname", name).
		Label(zoneKey, zone).Label(udKey, ud).Obj()
	node.Spec.ProviderID = fmt.Sprintf("%svirtualMachineScaleSets/%s/virtualMachines/%d", azurePrefix, vmss, i)
	return node
}

func replicaSet(ns, name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
}

func boundPod(name, nodeName string, owner *appsv1.ReplicaSet, labels map[string]string) *v1.Pod {
	p := st.MakePod().Namespace("default").Name(name).Node(nodeName).Labels(labels).Obj()
	if owner != nil {
		p.Namespace = owner.Namespace
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
	return p
}

func echoService(annotations map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo-service", Annotations: annotations},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "echo-pod"},
		},
	}
}

// TestLoadBalancerFieldReport is the field report's cluster: aks-pool-1-27255451-0 and
// aks-system-27255451-0, availability sets behind a Basic load balancer whose default backend is
// the system pool's set (the primary), and the echo Service with externalTrafficPolicy Local.
// The guard keeps the echo pods on pool-1, so without the annotation no endpoint gets traffic;
// the report's fix (the annotation naming pool-1's availability set) leaves nothing to find.
func TestLoadBalancerFieldReport(t *testing.T) {
	policy := DefaultPolicy()
	policy.LoadBalancer = azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUBasic, AzurePrimaryVMSet: "system-availabilitySet-27255451"}
	nodes := []*v1.Node{
		asNode("pool-1", 0, "0", "0"),
		asNode("system", 0, "0", "0", "kubernetes.azure.com/mode", "system"),
	}
	rs := replicaSet("default", "echo-deployment-575658b97c")
	echo := map[string]string{"app": "echo-pod"}
	pods := []*v1.Pod{
		boundPod("echo-deployment-575658b97c-5tvfb", "aks-pool-1-27255451-0", rs, echo),
		boundPod("echo-deployment-575658b97c-lxn4h", "aks-pool-1-27255451-0", rs, echo),
		boundPod("echo-deployment-575658b97c-nmgmn", "aks-pool-1-27255451-0", rs, echo),
	}
	const fix = "annotate the Service service.beta.kubernetes.io/azure-load-balancer-mode: pool-1-availabilitySet-27255451"

	t.Run("without the annotation", func(t *testing.T) {
		r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{echoService(nil)}}, policy)
		if len(r.LoadBalancerMismatches) != 4 {
			t.Fatalf("want 3 endpoints without traffic and the system-only backend, got %+v", r.LoadBalancerMismatches)
		}
		for _, f := range r.LoadBalancerMismatches {
			if f.Object != "default/echo-service" || f.Fix != fix {
				t.Errorf("finding %+v, want the fix %q", f, fix)
			}
		}
		if got := r.LoadBalancerMismatches[0]; got.Node != "" || !strings.Contains(got.Detail, "holds only system nodes") {
			t.Errorf("first finding %+v: want the Service-level finding that the backend holds only system nodes", got)
		}
	})
	t.Run("with the report's annotation", func(t *testing.T) {
		svc := echoService(map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "pool-1-availabilitySet-27255451"})
		r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{svc}}, policy)
		if len(r.LoadBalancerMismatches)+len(r.LoadBalancerUndetermined) != 0 {
			t.Errorf("findings with the fix applied: %+v %+v", r.LoadBalancerMismatches, r.LoadBalancerUndetermined)
		}
	})
	t.Run("Azure compares set names without case", func(t *testing.T) {
		svc := echoService(map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "POOL-1-AVAILABILITYSET-27255451"})
		if r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{svc}}, policy); len(r.LoadBalancerMismatches) != 0 {
			t.Errorf("findings: %+v", r.LoadBalancerMismatches)
		}
	})
	t.Run("the pool name is not a set name", func(t *testing.T) {
		svc := echoService(map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "pool-1"})
		r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{svc}}, policy)
		if len(r.LoadBalancerUndetermined) != 1 || !strings.Contains(r.LoadBalancerUndetermined[0].Detail, `no node is in availability set / scale set "pool-1"`) || r.LoadBalancerUndetermined[0].Fix != fix {
			t.Errorf("undetermined: %+v", r.LoadBalancerUndetermined)
		}
	})
	t.Run("__auto__ cannot be told", func(t *testing.T) {
		svc := echoService(map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "__auto__"})
		r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{svc}}, policy)
		if len(r.LoadBalancerMismatches) != 0 || len(r.LoadBalancerUndetermined) != 1 || r.LoadBalancerUndetermined[0].Fix != fix {
			t.Errorf("mismatches %+v, undetermined %+v", r.LoadBalancerMismatches, r.LoadBalancerUndetermined)
		}
		if r.NumFindings() != 0 {
			t.Errorf("undetermined backends counted as findings: %d", r.NumFindings())
		}
	})
	t.Run("Basic without a known primary set", func(t *testing.T) {
		p := policy
		p.LoadBalancer.AzurePrimaryVMSet = ""
		r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{echoService(nil)}}, p)
		if len(r.LoadBalancerUndetermined) != 1 || !strings.Contains(r.LoadBalancerUndetermined[0].Detail, "--azure-primary-vmset") {
			t.Errorf("undetermined: %+v", r.LoadBalancerUndetermined)
		}
	})
	t.Run("Standard: every node is a backend, the annotation is ignored", func(t *testing.T) {
		p := policy
		p.LoadBalancer = azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard}
		r := Compute(Inputs{Nodes: nodes, Pods: pods, Services: []*v1.Service{echoService(map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "system-availabilitySet-27255451"})}}, p)
		if len(r.LoadBalancerMismatches)+len(r.LoadBalancerUndetermined) != 0 {
			t.Errorf("findings: %+v %+v", r.LoadBalancerMismatches, r.LoadBalancerUndetermined)
		}
	})
	t.Run("Standard: excluded nodes are not backends", func(t *testing.T) {
		p := policy
		p.LoadBalancer = azurelb.LoadBalancerModel{AzureSKU: azurelb.SKUStandard}
		excluded := []*v1.Node{asNode("pool-1", 0, "0", "0", azurelb.ExcludeFromLoadBalancersLabel, "true"), nodes[1]}
		r := Compute(Inputs{Nodes: excluded, Pods: pods, Services: []*v1.Service{echoService(nil)}}, p)
		if len(r.LoadBalancerMismatches) != 4 {
			t.Fatalf("findings: %+v", r.LoadBalancerMismatches)
		}
		if got := r.LoadBalancerMismatches[1]; got.Node != "aks-pool-1-27255451-0" || !strings.Contains(got.Fix, azurelb.ExcludeFromLoadBalancersLabel) {
			t.Errorf("finding %+v", got)
		}
	})
	t.Run("Basic: pods in two sets, one backend", func(t *testing.T) {
		user2 := asNode("pool-2", 0, "1", "1")
		spread := append(append([]*v1.Pod{}, pods...), boundPod("echo-deployment-575658b97c-zzzzz", user2.Name, rs, echo))
		svc := echoService(map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "pool-1-availabilitySet-27255451"})
		r := Compute(Inputs{Nodes: append(append([]*v1.Node{}, nodes...), user2), Pods: spread, Services: []*v1.Service{svc}}, policy)
		want := []Finding{{
			Object: "default/echo-service", Node: user2.Name,
			Detail: "endpoint on node aks-pool-2-27255451-0 (pool pool-2, set pool-2-availabilitySet-27255451), outside the load balancer's backend pool: availability set / scale set pool-1-availabilitySet-27255451 (service.beta.kubernetes.io/azure-load-balancer-mode); it receives no traffic",
			Fix:    fix + " and keep its pods in that set's pool (they run in 2 sets; a Basic load balancer serves one)",
		}}
		if diff := cmp.Diff(want, r.LoadBalancerMismatches); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestDefaultDimensions shows the domain every kind of node gets on each default dimension: the
// zone first (a zonal node's zone, an availability-set node's fault domain from its zone label,
// pool-labeler's fault domain only where a node has no zone label), then update domain, host.
func TestDefaultDimensions(t *testing.T) {
	policy := DefaultPolicy()
	var names []string
	for _, d := range policy.Dimensions {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"zone", "update-domain", "host"}, names); diff != "" {
		t.Fatalf("default dimensions (-want +got):\n%s", diff)
	}
	noZone := st.MakeNode().Name("vm-0").Label("kubernetes.io/hostname", "vm-0").Label(fdKey, "1").Label(udKey, "4").Obj()
	zonalWithOldFD := vmssNode("user", 1, "westeurope-2", "0")
	zonalWithOldFD.Labels[fdKey] = "0" // written by an earlier labeler: must not replace the zone
	tests := []struct {
		name string
		node *v1.Node
		want []string
	}{
		{name: "zonal scale set", node: vmssNode("user", 0, "westeurope-1", "2"), want: []string{"westeurope-1", "2", "aks-user-27255451-vmss000000"}},
		{name: "zonal, stale fault-domain label", node: zonalWithOldFD, want: []string{"westeurope-2", "0", "aks-user-27255451-vmss000001"}},
		{name: "availability set", node: asNode("pool-1", 3, "1", "4"), want: []string{"1", "4", "aks-pool-1-27255451-3"}},
		{name: "no zone label: pool-labeler's fault domain", node: noZone, want: []string{"1", "4", "vm-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for d := range policy.Dimensions {
				v, _ := domainOf(policy.Dimensions, d, tt.node.Labels)
				got = append(got, v)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJointDimension(t *testing.T) {
	dims := []Dimension{{Name: "zone", Keys: []string{zoneKey}}, {Name: "fault-domain", Keys: []string{fdKey}, Joint: true}}
	a, _ := domainOf(dims, 1, map[string]string{zoneKey: "z1", fdKey: "0"})
	b, _ := domainOf(dims, 1, map[string]string{zoneKey: "z2", fdKey: "0"})
	if a == b {
		t.Errorf("fault domain 0 of two zones is one domain: %q", a)
	}
	if _, ok := domainOf(dims, 1, map[string]string{fdKey: "0"}); ok {
		t.Error("a joint dimension without the previous dimension's label has a domain")
	}
}

func TestNotAdmitted(t *testing.T) {
	pods := []*v1.Pod{
		st.MakePod().Namespace("team").Name("default").SchedulerName(v1.DefaultSchedulerName).Obj(),
		st.MakePod().Namespace("team").Name("empty").Obj(),
		st.MakePod().Namespace("team").Name("ours").SchedulerName("pool-scheduler").Obj(),
		st.MakePod().Namespace("team").Name("other-scheduler").SchedulerName("volcano").Obj(),
		st.MakePod().Namespace("team").Name("mirror").SchedulerName(v1.DefaultSchedulerName).Annotation(v1.MirrorPodAnnotationKey, "x").Obj(),
		st.MakePod().Namespace("team").Name("deleting").SchedulerName(v1.DefaultSchedulerName).Terminating().Obj(),
		st.MakePod().Namespace("elsewhere").Name("default").SchedulerName(v1.DefaultSchedulerName).Obj(),
	}
	r := Compute(Inputs{Pods: pods, OptedIn: map[string]bool{"team": true}, SchedulerName: "pool-scheduler"}, DefaultPolicy())
	var got []string
	for _, f := range r.NotAdmitted {
		got = append(got, f.Object)
	}
	if diff := cmp.Diff([]string{"team/default", "team/empty"}, got); diff != "" {
		t.Errorf("not admitted (-want +got):\n%s", diff)
	}
	if r.NumFindings() != 2 {
		t.Errorf("NumFindings = %d, want the 2 pods not admitted", r.NumFindings())
	}
	// Without opted-in namespaces (no admission path) nothing is reported.
	if r := Compute(Inputs{Pods: pods}, DefaultPolicy()); len(r.NotAdmitted) != 0 {
		t.Errorf("no namespace opted in, yet %v reported", r.NotAdmitted)
	}
}

func TestLabelSetFindings(t *testing.T) {
	sets := pool.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: "spot"},
		Spec:       labelsv1alpha1.NodePoolLabelSetSpec{Labels: map[string]labelsv1alpha1.LabelValue{"example.com/a": "1"}},
	}})
	labelled := func(name, p string) *v1.Node {
		return st.MakeNode().Name(name).Label("kubernetes.azure.com/agentpool", p).Annotation(pool.ManagedLabelsAnnotation, `["example.com/b"]`).Obj()
	}
	nodes := []*v1.Node{labelled("a-0", "pool1"), labelled("b-0", "gone"), labelled("s-0", "spot"), st.MakeNode().Name("c-0").Label("kubernetes.azure.com/agentpool", "pool2").Obj()}
	got := LabelSetFindings(pool.Identity{}, []string{"pool-scheduler"}, []string{"pipeline-system/pool1", "other/spot"}, sets, nodes)
	var objects []string
	for _, f := range got {
		objects = append(objects, f.Object)
	}
	// pool2 has no labelled node, spot has its set in view: neither is a pool finding.
	if diff := cmp.Diff([]string{"NodePoolLabelSet other/spot", "NodePoolLabelSet pipeline-system/pool1", "pool gone", "pool pool1"}, objects); diff != "" {
		t.Fatalf("findings (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		i           int
		detail, fix string
	}{
		{0, "pool spot is judged by its sets in pool-scheduler/spot only", "labelSetNamespaces [other, pool-scheduler]"},
		{1, "nodes of pool pool1 are not held until these labels are applied", "--set 'labelSets.namespaces={pipeline-system,pool-scheduler}'"},
		{2, "no NodePoolLabelSet gone is read", "kubectl annotate nodes -l <pool label>=gone " + pool.ManagedLabelsAnnotation + "-"},
		{3, "the pool's unlabelled nodes are held (LabelSetNotVisible)", "its set is pipeline-system/pool1"},
	} {
		if !strings.Contains(got[tt.i].Detail, tt.detail) || !strings.Contains(got[tt.i].Fix, tt.fix) {
			t.Errorf("%s: %q / fix %q, want %q / %q", got[tt.i].Object, got[tt.i].Detail, got[tt.i].Fix, tt.detail, tt.fix)
		}
	}
}
