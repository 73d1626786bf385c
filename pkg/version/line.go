package version

import (
	"fmt"

	k8sversion "k8s.io/component-base/version"
)

// One source tree builds a release line per Kubernetes minor (docs/compatibility.md): the
// default line from go.mod, the others from lines/k8s-<minor>/go.mod with a build tag. What
// differs between lines is in the tagged files line_k8s134.go and line_k8s136.go.

// SchedulerPlugins is the sigs.k8s.io/scheduler-plugins release bundled in pool-scheduler on
// this line, or "" when the line bundles none: scheduler-plugins releases are built for one
// Kubernetes minor, and none is available for the newer lines.
const SchedulerPlugins = schedulerPlugins

// KubernetesLine is the Kubernetes minor the binary's Kubernetes libraries come from, e.g.
// "1.34": component-base's own binary version, so it holds even in a build the Makefile did
// not stamp.
func KubernetesLine() string { return k8sversion.DefaultKubeBinaryVersion }

// Line describes the binary's release line in one line, e.g.
// "Kubernetes v1.34.10 (line 1.34, scheduler-plugins v0.34.7)". The Kubernetes release is the
// one the Makefile stamps into k8s.io/component-base/version (KUBE_VERSION of the line).
func Line() string {
	sp := SchedulerPlugins
	if sp == "" {
		sp = "none"
	}
	return fmt.Sprintf("Kubernetes %s (line %s, scheduler-plugins %s)", k8sversion.Get().GitVersion, KubernetesLine(), sp)
}
