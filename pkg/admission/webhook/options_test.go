package webhook

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestMutatorFromConfigSpreadFollowsDomainSpread: the degraded spread stands in for DomainSpread,
// so a profile that does not enable it gives degraded pods none (as the chart's policy does).
func TestMutatorFromConfigSpreadFollowsDomainSpread(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: pool-scheduler\n"
	for _, tt := range []struct {
		name   string
		config string
		want   int
	}{
		{name: "DomainSpread enabled", config: head + "  plugins: {multiPoint: {enabled: [{name: DomainSpread}]}}\n", want: 2},
		{name: "DomainSpread not enabled", config: head, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := MutatorFromConfig(path, "", false)
			if err != nil {
				t.Fatal(err)
			}
			pod := st.MakePod().Label("pod-template-hash", "h").OwnerReference("web", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
			m.MutateDegraded(pod)
			if got := len(pod.Spec.TopologySpreadConstraints); got != tt.want {
				t.Errorf("%d constraints, want %d: %+v", got, tt.want, pod.Spec.TopologySpreadConstraints)
			}
		})
	}
}
