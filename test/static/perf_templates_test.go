package static

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestPerfDegradedTemplates: the scheduler_perf pod templates that measure degraded mode carry
// what the hand-off injects with the shipped configuration (the system-node affinity, and the
// degraded spread), so the measured cost is the shipped one.
func TestPerfDegradedTemplates(t *testing.T) {
	data, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	args, err := profile.LoadArgs(data, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := admission.NewMutator("pool-scheduler", args.SystemPoolGuard, true)
	if err != nil {
		t.Fatal(err)
	}
	m.WithDegradedSpread(args.DomainSpread)
	for _, tt := range []struct {
		file   string
		spread bool
	}{{"pod-degraded-affinity.yaml", false}, {"pod-degraded.yaml", true}} {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(util.RepoRoot(), "test", "perf", "templates", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			// The harness's template placeholders, filled as for the first pod.
			text := strings.NewReplacer(`{{div .Index 5}}`, "0", `{{printf "%012d" (div .Index 5)}}`, "000000000000").Replace(string(raw))
			var got v1.Pod
			if err := yaml.UnmarshalStrict([]byte(text), &got); err != nil {
				t.Fatal(err)
			}
			want := got.DeepCopy()
			want.Spec.Affinity, want.Spec.TopologySpreadConstraints = nil, nil
			if !tt.spread {
				delete(want.Labels, "pod-template-hash")
			}
			// A workload's pod as a ReplicaSet creates it, through the degraded mutation.
			want.OwnerReferences[0].APIVersion, want.OwnerReferences[0].Kind = "apps/v1", "ReplicaSet"
			m.MutateDegraded(want)
			if diff := cmp.Diff(want.Spec.Affinity, got.Spec.Affinity); diff != "" {
				t.Errorf("affinity is not the degraded mutation's (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.Spec.TopologySpreadConstraints, got.Spec.TopologySpreadConstraints); diff != "" {
				t.Errorf("spread is not the degraded mutation's (-want +got):\n%s", diff)
			}
		})
	}
}
