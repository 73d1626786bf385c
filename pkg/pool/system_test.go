package pool

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
)

func defaultSystemPolicy(t *testing.T) *SystemPolicy {
	t.Helper()
	selector, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}})
	if err != nil {
		t.Fatal(err)
	}
	return &SystemPolicy{
		Pools:           sets.New("system"),
		NodeSelector:    selector,
		Namespaces:      sets.New("kube-system"),
		PriorityClasses: sets.New("system-cluster-critical", "system-node-critical"),
		TolerationKeys:  sets.New("CriticalAddonsOnly"),
		DaemonSetPods:   true,
	}
}

func TestClassifyNode(t *testing.T) {
	tests := []struct {
		name   string
		policy func(*SystemPolicy)
		labels map[string]string
		want   SystemNodeReason
	}{
		{name: "banzai system pool", labels: map[string]string{"nodepool.banzaicloud.io/name": "system"}, want: SystemPoolName},
		{name: "aks system pool by name", labels: map[string]string{"kubernetes.azure.com/agentpool": "system"}, want: SystemPoolName},
		{name: "aks system mode label", labels: map[string]string{"kubernetes.azure.com/agentpool": "sysnp", "kubernetes.azure.com/mode": "system"}, want: SystemNodeSelector},
		{name: "aks user mode", labels: map[string]string{"kubernetes.azure.com/agentpool": "user", "kubernetes.azure.com/mode": "user"}, want: NotSystemNode},
		{name: "user pool", labels: map[string]string{"nodepool.banzaicloud.io/name": "spot"}, want: NotSystemNode},
		{name: "node with no pool", labels: map[string]string{"kubernetes.io/hostname": "n"}, want: NotSystemNode},
		{name: "nil labels", labels: nil, want: NotSystemNode},
		{
			name:   "pool name is read with the first pool key, not any key",
			labels: map[string]string{"nodepool.banzaicloud.io/name": "spot", "agentpool": "system"},
			want:   NotSystemNode,
		},
		{
			name:   "no selector",
			policy: func(p *SystemPolicy) { p.NodeSelector = nil },
			labels: map[string]string{"kubernetes.azure.com/mode": "system"},
			want:   NotSystemNode,
		},
		{
			name:   "empty selector matches nothing, not everything",
			policy: func(p *SystemPolicy) { p.NodeSelector = labels.Everything() },
			labels: map[string]string{"nodepool.banzaicloud.io/name": "spot"},
			want:   NotSystemNode,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultSystemPolicy(t)
			if tt.policy != nil {
				tt.policy(p)
			}
			if got := p.ClassifyNode(tt.labels); got != tt.want {
				t.Errorf("ClassifyNode() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsSystemPod(t *testing.T) {
	ds := st.MakePod().Namespace("monitoring").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()
	dsNotController := st.MakePod().Namespace("monitoring").OwnerReference("agent", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()
	dsNotController.OwnerReferences[0].Controller = ptr.To(false)
	rs := st.MakePod().Namespace("default").OwnerReference("web-abc", v1.SchemeGroupVersion.WithKind("ReplicaSet")).Obj()
	// Anyone who may create a pod may write this owner reference: a kind DaemonSet of another
	// API group (here a custom resource's) must not make it a system pod.
	dsOtherGroup := st.MakePod().Namespace("monitoring").OwnerReference("agent", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "DaemonSet"}).Obj()
	dsCoreGroup := st.MakePod().Namespace("monitoring").OwnerReference("agent", v1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()

	tests := []struct {
		name   string
		policy func(*SystemPolicy)
		pod    *v1.Pod
		want   bool
	}{
		{name: "kube-system pod", pod: st.MakePod().Namespace("kube-system").Obj(), want: true},
		{name: "user namespace", pod: st.MakePod().Namespace("default").Obj(), want: false},
		{name: "system-cluster-critical", pod: withPriorityClass(st.MakePod().Namespace("ingress").Obj(), "system-cluster-critical"), want: true},
		{name: "system-node-critical", pod: withPriorityClass(st.MakePod().Namespace("ingress").Obj(), "system-node-critical"), want: true},
		{name: "other priority class", pod: withPriorityClass(st.MakePod().Namespace("default").Obj(), "high"), want: false},
		{name: "DaemonSet pod", pod: ds, want: true},
		{name: "DaemonSet pods not system when disabled", policy: func(p *SystemPolicy) { p.DaemonSetPods = false }, pod: ds, want: false},
		{name: "DaemonSet owner that is not the controller", pod: dsNotController, want: false},
		{name: "DaemonSet owner of another API group", pod: dsOtherGroup, want: false},
		{name: "DaemonSet owner of the core group", pod: dsCoreGroup, want: false},
		{name: "ReplicaSet pod", pod: rs, want: false},
		{
			name: "explicit system toleration",
			pod:  st.MakePod().Namespace("default").Toleration("CriticalAddonsOnly").Obj(),
			want: true,
		},
		{
			name: "wildcard toleration does not count",
			pod: func() *v1.Pod {
				p := st.MakePod().Namespace("default").Obj()
				p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
				return p
			}(),
			want: false,
		},
		{
			name: "PreferNoSchedule toleration of another key does not count",
			pod: func() *v1.Pod {
				p := st.MakePod().Namespace("default").Obj()
				p.Spec.Tolerations = []v1.Toleration{{Key: "example.com/dedicated", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule}}
				return p
			}(),
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultSystemPolicy(t)
			if tt.policy != nil {
				tt.policy(p)
			}
			if got := p.IsSystemPod(tt.pod); got != tt.want {
				t.Errorf("IsSystemPod() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSystemNodeDoesNotAllocate(t *testing.T) {
	p := defaultSystemPolicy(t)
	user := map[string]string{"kubernetes.azure.com/agentpool": "user", "kubernetes.azure.com/mode": "user"}
	if n := testing.AllocsPerRun(100, func() { p.ClassifyNode(user) }); n != 0 {
		t.Errorf("ClassifyNode allocates %v times per call", n)
	}
}

func withPriorityClass(p *v1.Pod, name string) *v1.Pod {
	p.Spec.PriorityClassName = name
	return p
}
