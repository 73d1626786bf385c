//go:build k8s136

package taints

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
)

// As kube-scheduler's own TaintToleration and PodTopologySpread plugins do, numeric toleration
// operators (Gt, Lt) count only with the TaintTolerationComparisonOperators gate (alpha, off by
// default in 1.35 and 1.36) on; the logger reports tolerations whose values do not parse.
func findMatchingUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, filter func(*v1.Taint) bool) (v1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, tolerations, filter,
		utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators))
}
