package static

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// TestLabelerPolicySystemNodeKeys: the labeler controller's admission policy (kustomize) refuses
// the labels SystemPoolGuard's systemNodeSelector reads in the shipped scheduler configuration;
// a selector changed there must be changed in the policy too, or the labeler could turn nodes
// into or out of system nodes.
func TestLabelerPolicySystemNodeKeys(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	args, err := profile.LoadArgs(data, "pool-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	// The keys the labeler and NodePoolReady refuse to label sets (pool.RefusedKey, #34).
	want := pool.SystemNodeKeys(args.SystemPoolGuard)
	policy, err := os.ReadFile(filepath.Join(root, "manifests", "labeler", "controller", "admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`name: systemNodeKeys\s+expression: "(\[[^\]]*\])"`).FindSubmatch(policy)
	if m == nil {
		t.Fatal("manifests/labeler/controller/admission-policy.yaml has no systemNodeKeys variable")
	}
	got := celStrings(string(m[1]))
	if len(got) == 1 && got[0] == "" {
		got = nil
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the policy's systemNodeKeys differ from the shipped systemNodeSelector's keys (-config +policy):\n%s", diff)
	}
}
