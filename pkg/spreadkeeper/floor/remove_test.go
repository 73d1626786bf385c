package floor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// TestRemove: the binding goes first, then every budget with the floor's label, each tried
// every round: one refused holds back no other and is reported when time runs out; one already
// going (a finalizer) does not keep Remove from settling; a user's budget is never touched.
func TestRemove(t *testing.T) {
	const binding = "pool-scheduler-spread-budget-floor"
	floorBudget := func(name string) *policyv1.PodDisruptionBudget {
		p := budget(name, nil)
		p.Labels = map[string]string{ManagedByLabel: ManagedBy}
		return p
	}
	going := floorBudget("going-budget-floor")
	going.DeletionTimestamp, going.Finalizers = &metav1.Time{Time: time.Now()}, []string{"example.com/hold"}
	tests := []struct {
		name        string
		refuse      string // a budget whose deletion another admission refuses
		wantLeft    []string
		wantDeleted int
		wantErr     string
	}{
		{name: "every budget of the floor, the user's kept", wantLeft: []string{"going-budget-floor", "users"}, wantDeleted: 3},
		{name: "one refused, the others deleted", refuse: "b-budget-floor", wantLeft: []string{"b-budget-floor", "going-budget-floor", "users"}, wantDeleted: 2,
			wantErr: "b-budget-floor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			user := budget("users", nil)
			cs := fake.NewClientset(floorBudget("a-budget-floor"), floorBudget("b-budget-floor"), floorBudget("c-budget-floor"), going.DeepCopy(), user,
				&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding}})
			var order []string
			cs.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
				d := a.(clienttesting.DeleteAction)
				order = append(order, a.GetResource().Resource+"/"+d.GetName())
				if d.GetName() == tt.refuse {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, d.GetName(), nil)
				}
				return false, nil, nil
			})
			ctx, cancel := context.WithTimeout(tCtx, 5*time.Second)
			defer cancel()
			deleted, err := Remove(ctx, cs, binding, 200*time.Millisecond)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Remove: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Remove: %v, want an error naming %s", err, tt.wantErr)
			}
			if deleted != tt.wantDeleted {
				t.Errorf("Remove deleted %d budgets, want %d", deleted, tt.wantDeleted)
			}
			if len(order) == 0 || order[0] != "clusterrolebindings/"+binding {
				t.Errorf("deletions %v: want the binding first", order)
			}
			left, err := cs.PolicyV1().PodDisruptionBudgets("").List(tCtx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range left.Items {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tt.wantLeft, names); diff != "" {
				t.Errorf("budgets left (-want +got):\n%s", diff)
			}
			if _, err := cs.RbacV1().ClusterRoleBindings().Get(tCtx, binding, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the binding after Remove: %v, want gone", err)
			}
		})
	}
}

// TestRemoveCutShort: a round the deadline cuts short (its list fails with the context) is not
// a quiet round: Remove reports the budget still refused, not success.
func TestRemoveCutShort(t *testing.T) {
	tCtx := ktesting.Init(t)
	b := budget("b-budget-floor", nil)
	b.Labels = map[string]string{ManagedByLabel: ManagedBy}
	cs := fake.NewClientset(b)
	ctx, cancel := context.WithCancel(tCtx)
	defer cancel()
	cs.PrependReactor("delete", "poddisruptionbudgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, "b-budget-floor", nil)
	})
	lists := 0
	cs.PrependReactor("list", "poddisruptionbudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		if lists++; lists < 2 {
			return false, nil, nil
		}
		cancel() // the deadline, as it falls in the second round's list
		return true, nil, context.Canceled
	})
	_, err := Remove(ctx, cs, "binding", 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "b-budget-floor") {
		t.Errorf("Remove: %v, want an error naming b-budget-floor", err)
	}
}
