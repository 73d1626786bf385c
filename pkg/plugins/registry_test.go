package plugins

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
)

// TestSystemArgsOf: NodePoolReady gets the SystemPoolGuard args of its own profile (#34), so it
// ignores the label-set keys that profile's systemNodeSelector reads; a profile without them,
// or an unknown one, gets the defaults (defined once, in the args' v1 defaults).
func TestSystemArgsOf(t *testing.T) {
	own := &config.SystemPoolGuardArgs{SystemNodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/system": "true"}}}
	profiles := []schedconfig.KubeSchedulerProfile{
		{SchedulerName: "bare"},
		{SchedulerName: "pool-scheduler", PluginConfig: []schedconfig.PluginConfig{
			{Name: "NodePoolReady", Args: &config.NodePoolReadyArgs{}},
			{Name: "SystemPoolGuard", Args: own},
		}},
	}
	tests := []struct {
		profile string
		want    *config.SystemPoolGuardArgs
	}{
		{profile: "pool-scheduler", want: own},
		{profile: "bare", want: configscheme.DefaultSystemPoolGuardArgs()},
		{profile: "", want: configscheme.DefaultSystemPoolGuardArgs()},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, systemArgsOf(profiles, tt.profile)); diff != "" {
			t.Errorf("profile %q (-want +got):\n%s", tt.profile, diff)
		}
	}
}
