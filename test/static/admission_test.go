package static

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
)

// TestAdmissionManifestsGenerated: the kustomize admission manifests and the chart's CEL are
// what pkg/admission renders from the shipped scheduler configuration (run make generate).
func TestAdmissionManifestsGenerated(t *testing.T) {
	root := repoRoot(t)
	want, err := admission.GeneratedManifests(root)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range want {
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%v (run make generate)", err)
			continue
		}
		if diff := cmp.Diff(string(data), string(got)); diff != "" {
			t.Errorf("%s is not current; run make generate (-want +got):\n%s", path, diff)
		}
	}
}
