package floor

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestMinAvailable(t *testing.T) {
	// ceil(2r/3) stay Ready; from 3 replicas on at least one may be evicted.
	want := map[int32]int32{1: 1, 2: 2, 3: 2, 4: 3, 5: 4, 6: 4, 7: 5, 8: 6, 9: 6, 10: 7, 12: 8, 30: 20, 31: 21}
	got := map[int32]int32{}
	for r := range want {
		got[r] = MinAvailable(r)
		if r >= MinReplicas && r-got[r] < 1 {
			t.Errorf("%d replicas: minAvailable %d allows no eviction", r, got[r])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MinAvailable (-want +got):\n%s", diff)
	}
}

func deployment(name string, replicas int32, selector map[string]string, template map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: templateWith(template),
		},
	}
}

func budget(name string, selector *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: selector}}
}

func TestDecide(t *testing.T) {
	web := map[string]string{"app": "web"}
	webT := map[string]string{"app": "web", "tier": "front"}
	out := deployment("web", 3, web, webT)
	out.Annotations = map[string]string{Annotation: "false"}
	gone := deployment("web", 3, web, webT)
	gone.DeletionTimestamp = &metav1.Time{}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", UID: "uid-db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: templateWith(map[string]string{"app": "db"})}}
	tests := []struct {
		name    string
		w       workload
		others  []workload
		foreign []*policyv1.PodDisruptionBudget
		want    reason
	}{
		{name: "3 replicas, no budget", w: fromDeployment(deployment("web", 3, web, webT)), want: kept},
		{name: "a StatefulSet", w: fromStatefulSet(sts), want: kept},
		{name: "2 replicas", w: fromDeployment(deployment("web", 2, web, webT)), want: tooSmall},
		{name: "2 replicas, opted out: too small first", w: func() workload {
			d := deployment("web", 2, web, webT)
			d.Annotations = out.Annotations
			return fromDeployment(d)
		}(), want: tooSmall},
		{name: "replicas unset (1)", w: func() workload { d := deployment("web", 0, web, webT); d.Spec.Replicas = nil; return fromDeployment(d) }(), want: tooSmall},
		{name: "opted out", w: fromDeployment(out), want: optedOut},
		{name: "being deleted", w: fromDeployment(gone), want: deleting},
		{name: "empty selector", w: fromDeployment(deployment("web", 3, nil, webT)), want: badSelector},
		{name: "the user's budget matches", w: fromDeployment(deployment("web", 3, web, webT)),
			foreign: []*policyv1.PodDisruptionBudget{budget("mine", &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}})}, want: ownBudget},
		{name: "a namespace-wide budget (empty selector) matches", w: fromDeployment(deployment("web", 3, web, webT)),
			foreign: []*policyv1.PodDisruptionBudget{budget("all", &metav1.LabelSelector{})}, want: ownBudget},
		{name: "a budget without selector matches nothing", w: fromDeployment(deployment("web", 3, web, webT)),
			foreign: []*policyv1.PodDisruptionBudget{budget("none", nil)}, want: kept},
		{name: "another workload's budget", w: fromDeployment(deployment("web", 3, web, webT)),
			foreign: []*policyv1.PodDisruptionBudget{budget("db", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}})}, want: kept},
		{name: "its selector matches another workload's pods", w: fromDeployment(deployment("web", 3, web, webT)),
			others: []workload{fromDeployment(deployment("web-canary", 1, map[string]string{"app": "web", "track": "canary"}, map[string]string{"app": "web", "track": "canary"}))}, want: overlap},
		{name: "another workload, apart", w: fromDeployment(deployment("web", 3, web, webT)),
			others: []workload{fromStatefulSet(sts)}, want: kept},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := append([]workload{tt.w}, tt.others...)
			if got := decide(tt.w, all, tt.foreign); got != tt.want {
				t.Errorf("decide = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDesired(t *testing.T) {
	d := deployment("web", 7, map[string]string{"app": "web"}, map[string]string{"app": "web"})
	got := desired(fromDeployment(d))
	want := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-budget-floor", Labels: map[string]string{ManagedByLabel: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: ptr.To(true)}}},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MinAvailable:               ptr.To(intstr.FromInt32(5)),
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("desired (-want +got):\n%s", diff)
	}
	// The budget's selector is a copy: the cached workload is never written through it.
	got.Spec.Selector.MatchLabels["app"] = "changed"
	if d.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("desired shares the workload's selector")
	}
	if !sameSpec(want, desired(fromDeployment(d))) {
		t.Errorf("sameSpec(desired, desired) = false")
	}
	d.Spec.Replicas = ptr.To[int32](9)
	if sameSpec(want, desired(fromDeployment(d))) {
		t.Errorf("sameSpec after a scale from 7 to 9 replicas = true, want a resize")
	}
	edited := want.DeepCopy()
	edited.Spec.MinAvailable, edited.Spec.MaxUnavailable = nil, ptr.To(intstr.FromInt32(2))
	if sameSpec(edited, want) {
		t.Errorf("sameSpec of a maxUnavailable budget = true, want it corrected")
	}
}

func TestBudgetName(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct{ name, want string }{
		{"web", "web-budget-floor"},
		{strings.Repeat("b", 253-len(nameSuffix)), strings.Repeat("b", 253-len(nameSuffix)) + nameSuffix},
	}
	for _, tt := range tests {
		if got := budgetName(tt.name); got != tt.want {
			t.Errorf("budgetName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	a, b := budgetName(long), budgetName(long[:249]+"b")
	if len(a) > 253 || len(b) > 253 || a == b || !strings.HasSuffix(a, nameSuffix) {
		t.Errorf("long names: %q (%d), %q (%d): want distinct names of at most 253 characters ending %s", a, len(a), b, len(b), nameSuffix)
	}
}

func templateWith(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
}
