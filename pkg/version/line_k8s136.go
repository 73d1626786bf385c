//go:build k8s136

package version

// Lines built with -tags=k8s136 (Kubernetes 1.35 and later) bundle no scheduler-plugins: its
// newest release, v0.34.7, is built against the 1.34 framework API (the 1.34 line bundles it)
// and no later one is available (cmd/pool-scheduler/app/schedulerplugins_k8s136.go).
const schedulerPlugins = ""
