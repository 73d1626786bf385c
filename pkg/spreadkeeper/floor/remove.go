package floor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
)

// Remove is what removing the floor must do (pool-labeler handback --budget-floor-binding, the
// chart's pre-delete hook): left behind, a budget keeps the count of the last reconcile, and
// after a scale-down (9 to 3 replicas, minAvailable 6) it refuses every eviction of a healthy
// replica, holding drains until AKS's drain timeout. First it deletes binding, the
// ClusterRoleBinding that grants the floor its writes, so a spread keeper still running cannot
// put a budget back; then it deletes every budget the floor keeps (its label), until none has
// been seen for settle (the authorizer's cache may let a write through for a moment after the
// binding is gone). It returns how many budgets it deleted.
func Remove(ctx context.Context, cs kubernetes.Interface, binding string, settle time.Duration) (int, error) {
	logger := klog.FromContext(ctx)
	selector := labels.Set{ManagedByLabel: ManagedBy}.String()
	list := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, opts)
	}))
	revoked, deleted := false, 0
	quiet := time.Now()
	// What keeps Remove from settling, each budget's last refusal by key: kept across rounds so
	// that an error of the round the deadline cut short hides none.
	var revokeErr, listErr error
	refused := map[string]error{}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		// Retried, not fatal: the hook's own RBAC may not have reached the authorizer yet.
		if !revoked {
			if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, binding, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				if ctx.Err() == nil {
					revokeErr = fmt.Errorf("revoking the budget floor's writes (deleting the ClusterRoleBinding %s): %w", binding, err)
					logger.Error(err, "Revoking the budget floor's writes failed; retrying", "clusterRoleBinding", binding)
				}
				return false, nil
			}
			revoked, revokeErr, quiet = true, nil, time.Now()
			logger.Info("Budget floor's writes revoked", "clusterRoleBinding", binding)
		}
		// Every budget is tried each round: one refused (another admission webhook, a 5xx)
		// holds back no other.
		failed := false
		err := list.EachListItem(ctx, metav1.ListOptions{LabelSelector: selector}, func(obj runtime.Object) error {
			p := obj.(*policyv1.PodDisruptionBudget)
			if p.DeletionTimestamp != nil {
				return nil // going (a finalizer holds it): nothing to add
			}
			quiet = time.Now()
			key := p.Namespace + "/" + p.Name
			// That object: a budget replaced in the meantime is listed again next round.
			err := cs.PolicyV1().PodDisruptionBudgets(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			switch {
			case err == nil:
				deleted++
				delete(refused, key)
				logger.V(2).Info("Budget floor's budget deleted", "podDisruptionBudget", klog.KObj(p))
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				delete(refused, key)
			case ctx.Err() == nil:
				failed = true
				refused[key] = err
				logger.Error(err, "Deleting a budget of the floor failed; retrying", "podDisruptionBudget", klog.KObj(p))
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				listErr = err
				logger.Error(err, "Listing the budget floor's budgets failed; retrying")
			}
			return false, nil
		}
		listErr = nil
		// A round the deadline cut short saw too little to settle on (its list or deletes
		// failed with the context): the poll returns the deadline, with what was refused.
		return !failed && ctx.Err() == nil && time.Since(quiet) >= settle, nil
	})
	logger.Info("Budget floor's budgets deleted", "count", deleted)
	if err != nil {
		errs := []error{err, revokeErr, listErr}
		keys := make([]string, 0, len(refused))
		for k := range refused {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, fmt.Errorf("deleting %s: %w", k, refused[k]))
		}
		return deleted, fmt.Errorf("budgets of the floor left after %d deleted: %w", deleted, errors.Join(errs...))
	}
	return deleted, nil
}
