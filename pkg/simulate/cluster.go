package simulate

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Label keys the scenario nodes carry for their domains, as on AKS: the zone label holds the
// zone on zonal pools and the platform fault domain elsewhere (cloud-provider-azure's rule);
// pool-labeler's domain mode writes the update domain, and the fault domain outside zones.
const (
	ZoneKey         = configv1.ZoneLabelKey
	FaultDomainKey  = configv1.FaultDomainLabelKey
	UpdateDomainKey = configv1.UpdateDomainLabelKey
	holdFinalizer   = "pool-scheduler.io/simulated-termination"
	labelSetNS      = "pool-scheduler"
	// A made-up subscription and node resource group for Azure providerIDs.
	azureResourcePrefix = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_simulate/providers/Microsoft.Compute/"
)

// nodeName names the i-th node of a pool: as AKS does with azure (aks-<pool>-<hash>-vmss<base-36
// instance, 6 characters> in a scale set, aks-<pool>-<hash>-vms<n> in a Virtual Machines node
// pool, aks-<pool>-<hash>-<index> in an availability set).
func (s *Scenario) nodeName(p *Pool, i int) string {
	switch {
	case s.Azure == nil:
		return fmt.Sprintf("%s-%03d", p.Name, i)
	case p.VMType == VMTypeScaleSet:
		return fmt.Sprintf("%s%06s", s.scaleSetName(p), strconv.FormatInt(int64(i), 36))
	case p.VMType == VMTypeVirtualMachines:
		return fmt.Sprintf("aks-%s-%s-vms%d", p.Name, s.Azure.ClusterHash, i)
	}
	return fmt.Sprintf("aks-%s-%s-%d", p.Name, s.Azure.ClusterHash, i)
}

// VMSetName is the availability set or scale set AKS creates for a pool ("" without azure, and
// for a Virtual Machines node pool, whose VMs belong to neither).
func (s *Scenario) VMSetName(p *Pool) string {
	switch {
	case s.Azure == nil, p.VMType == VMTypeVirtualMachines:
		return ""
	case p.VMType == VMTypeScaleSet:
		return s.scaleSetName(p)
	default:
		return fmt.Sprintf("%s-availabilitySet-%s", p.Name, s.Azure.ClusterHash)
	}
}

func (s *Scenario) scaleSetName(p *Pool) string {
	return fmt.Sprintf("aks-%s-%s-vmss", p.Name, s.Azure.ClusterHash)
}

func (s *Scenario) providerID(p *Pool, i int) string {
	switch {
	case s.Azure == nil:
		return ""
	case p.VMType == VMTypeScaleSet:
		return fmt.Sprintf("%svirtualMachineScaleSets/%s/virtualMachines/%d", azureResourcePrefix, s.scaleSetName(p), i)
	default:
		return azureResourcePrefix + "virtualMachines/" + s.nodeName(p, i)
	}
}

// zoneName is the zone label of a zonal pool's zone index.
func zoneName(s *Scenario, i int) string {
	region := "region"
	if s.Azure != nil {
		region = s.Azure.Region
	}
	return fmt.Sprintf("%s-%d", region, 1+i)
}

// buildNode returns the i-th node of the pool; labelled says whether the NodePoolLabelSet's
// labels are already applied (with the managed-labels annotation, as the labeler leaves it).
func (s *Scenario) buildNode(p *Pool, i int, labelled bool) *v1.Node {
	name := s.nodeName(p, i)
	labels := map[string]string{p.PoolLabelKey: p.Name, v1.LabelHostname: name, v1.LabelOSStable: "linux"}
	for k, v := range p.Labels {
		labels[k] = v
	}
	perDomain := 1
	switch {
	case p.Zones > 0:
		labels[ZoneKey] = zoneName(s, i%p.Zones)
		perDomain = p.Zones
	case p.FaultDomains > 0 || s.Azure != nil:
		// cloud-provider-azure labels every VM outside zones with its fault domain.
		fds := max(p.FaultDomains, 1)
		labels[ZoneKey] = fmt.Sprint(i % fds)
		labels[FaultDomainKey] = labels[ZoneKey]
		perDomain = fds
	}
	switch {
	case p.UpdateDomains > 0:
		labels[UpdateDomainKey] = fmt.Sprint(i / perDomain % p.UpdateDomains)
	case p.VMType == VMTypeVirtualMachines:
		labels[UpdateDomainKey] = "0" // what pool-labeler reads from a standalone VM's metadata
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: s.providerID(p, i)}}
	if labelled && len(p.LabelSet) > 0 {
		applyLabelSet(node, p)
	}
	for _, t := range p.Taints {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(p.CPU),
		v1.ResourceMemory: resource.MustParse(p.Memory),
		v1.ResourcePods:   *resource.NewQuantity(int64(p.Pods), resource.DecimalSI),
	}
	node.Status = v1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
	}
	return node
}

func applyLabelSet(node *v1.Node, p *Pool) {
	var keys []string
	for k, v := range p.LabelSet {
		node.Labels[k] = v
		keys = append(keys, k)
	}
	labels := pool.CompileLabelSets([]*labelsv1alpha1.NodePoolLabelSet{labelSetOf(p)}).Pool(p.Name)
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[pool.ManagedLabelsAnnotation] = labels.ManagedLabelsAnnotation()
}

func labelSetOf(p *Pool) *labelsv1alpha1.NodePoolLabelSet {
	values := map[string]labelsv1alpha1.LabelValue{}
	for k, v := range p.LabelSet {
		values[k] = labelsv1alpha1.LabelValue(v)
	}
	return &labelsv1alpha1.NodePoolLabelSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: labelsv1alpha1.SchemeGroupVersion.String(), Kind: "NodePoolLabelSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: labelSetNS, Name: p.Name},
		Spec:       labelsv1alpha1.NodePoolLabelSetSpec{Labels: values},
	}
}

func replicaSet(w *Workload, i, revision int) *appsv1.ReplicaSet {
	name := fmt.Sprintf("%s-%02d-r%d", w.Name, i, revision)
	labels := map[string]string{"app": w.Name, "set": fmt.Sprintf("%s-%02d", w.Name, i)}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: name, Labels: labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(w.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
}

// replica is the j-th pod of rs, as the ReplicaSet controller would create it.
func replica(w *Workload, rs *appsv1.ReplicaSet, j int, schedulerName string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: rs.Namespace, Name: fmt.Sprintf("%s-%d", rs.Name, j), Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		},
		Spec: v1.PodSpec{
			SchedulerName:     schedulerName,
			PriorityClassName: w.PriorityClassName,
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(w.CPU)}}}},
		},
	}
	if w.Rollout {
		// Holds the pod in Terminating when the rollout deletes it, as a grace period would.
		pod.Finalizers = []string{holdFinalizer}
	}
	if len(w.RequireLabels) > 0 {
		pod.Spec.NodeSelector = w.RequireLabels
	}
	if w.TolerateAll {
		pod.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	}
	if len(w.AvoidLabels) > 0 {
		var exprs []v1.NodeSelectorRequirement
		for k, v := range w.AvoidLabels {
			exprs = append(exprs, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpNotIn, Values: []string{v}})
		}
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: exprs}},
		}}}
	}
	return pod
}

func service(s *Service) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Selector:              map[string]string{"app": s.Workload},
			Ports:                 []v1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	if len(s.BackendPools) > 0 || len(s.Annotations) > 0 {
		svc.Annotations = map[string]string{}
	}
	if len(s.BackendPools) > 0 {
		svc.Annotations[azurelb.LoadBalancerPoolsAnnotation] = strings.Join(s.BackendPools, ",")
	}
	for k, v := range s.Annotations {
		svc.Annotations[k] = v
	}
	return svc
}
