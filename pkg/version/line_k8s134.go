//go:build !k8s136

package version

// The 1.34 line bundles scheduler-plugins (cmd/pool-scheduler/app/schedulerplugins_k8s134.go);
// cmd/pool-scheduler/app's tests check this against the module version compiled in.
const schedulerPlugins = "v0.34.7"
