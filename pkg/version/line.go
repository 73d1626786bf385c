package version

import (
	"fmt"
	"strings"

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

// ServesServer reports whether this line may run against a kube-apiserver of version
// major.minor (as discovery gives them; a trailing "+" is ignored). Kubernetes' version-skew
// policy lets kube-scheduler be at most one minor older than kube-apiserver and never newer, so
// a line serves its own minor and the next. The error says which line to run instead.
func ServesServer(major, minor string) error {
	var lineMajor, lineMinor, serverMajor, serverMinor int
	if _, err := fmt.Sscanf(KubernetesLine(), "%d.%d", &lineMajor, &lineMinor); err != nil {
		return fmt.Errorf("this build's line %q: %w", KubernetesLine(), err)
	}
	if _, err := fmt.Sscanf(major+"."+strings.TrimSuffix(minor, "+"), "%d.%d", &serverMajor, &serverMinor); err != nil {
		return fmt.Errorf("kube-apiserver version %q.%q: %w", major, minor, err)
	}
	if serverMajor != lineMajor || serverMinor < lineMinor || serverMinor > lineMinor+1 {
		return fmt.Errorf("kube-apiserver is %d.%d, outside this line's %d.%d and %d.%d (the version-skew policy): run the release line of %d.%d (docs/compatibility.md)",
			serverMajor, serverMinor, lineMajor, lineMinor, lineMajor, lineMinor+1, serverMajor, serverMinor)
	}
	return nil
}
