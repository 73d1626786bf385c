// Command admission-manifests writes the admission manifests that are generated from
// pkg/admission and the shipped scheduler configuration (make generate runs it; a test in
// test/static checks they are current):
//   - manifests/admission/policy/policy.yaml: the MutatingAdmissionPolicy and its binding;
//   - manifests/admission/webhook/mutatingwebhookconfiguration.yaml;
//   - manifests/charts/pool-scheduler/files/affinity-patch.cel: the policy's JSONPatch CEL,
//     which the chart fills with the requirements its values imply.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	files, err := admission.GeneratedManifests(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admission-manifests:", err)
		os.Exit(1)
	}
	for path, data := range files {
		if err := os.WriteFile(filepath.Join(root, path), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "admission-manifests:", err)
			os.Exit(1)
		}
	}
}
