package static

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestKustomizeBaseCannotLoop: `kubectl apply -k manifests` installs no admission path, so no pod
// is marked as handed over; its hand-off controller runs with --handback=true (for when an
// admission path is added), and may delete only marked pods: the controller hands back only
// those, and the deletion policy, kustomize's and the chart's, refuses any other. So in that
// install nothing is ever handed back (test/integration TestHandbackNeverLoops runs it).
func TestKustomizeBaseCannotLoop(t *testing.T) {
	root := repoRoot(t)
	read := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal([]byte(read("manifests/kustomization.yaml")), &k); err != nil {
		t.Fatal(err)
	}
	for _, r := range k.Resources {
		if strings.HasPrefix(r, "admission") {
			t.Errorf("manifests/kustomization.yaml installs an admission path (%s): docs/operations.md says the base has none", r)
		}
	}
	if !strings.Contains(read("manifests/handoff/deployment.yaml"), "--handback=true") {
		t.Error("manifests/handoff/deployment.yaml: the hand-off controller no longer hands back; update docs/operations.md and this test")
	}
	const markerRule = "variables.handedOverKey in oldObject.metadata.annotations"
	for _, f := range []string{"manifests/handoff/admission-policy.yaml", "manifests/charts/pool-scheduler/templates/handoff-policy.yaml"} {
		if !strings.Contains(read(f), "- expression: has(oldObject.metadata.annotations) && "+markerRule) {
			t.Errorf("%s: no validation refusing the deletion of a pod admission did not hand over (%s)", f, markerRule)
		}
	}
}
