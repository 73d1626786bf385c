//go:build !k8s136

package perf

import "testing"

// suiteConfig returns the scheduler_perf configuration to run: on this line the file itself (its
// templates use scheduler_perf's v1.34 functions, div and mod).
func suiteConfig(testing.TB, string) string { return "config/performance-config.yaml" }
