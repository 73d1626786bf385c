// Package taints is component-helpers' taint matching as pool-scheduler uses it, on every
// Kubernetes line it is built for (docs/compatibility.md): Kubernetes 1.35 added a logger and the
// TaintTolerationComparisonOperators switch to FindMatchingUntoleratedTaint.
package taints

import v1 "k8s.io/api/core/v1"

// FindMatchingUntoleratedTaint returns the first taint that passes filter (all, when nil) and
// that tolerations do not tolerate, and true; or false when they tolerate them all.
func FindMatchingUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, filter func(*v1.Taint) bool) (v1.Taint, bool) {
	if len(taints) == 0 {
		return v1.Taint{}, false
	}
	return findMatchingUntoleratedTaint(taints, tolerations, filter)
}
