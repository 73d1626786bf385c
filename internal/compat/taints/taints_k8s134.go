//go:build !k8s136

package taints

import (
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

func findMatchingUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, filter func(*v1.Taint) bool) (v1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(taints, tolerations, filter)
}
