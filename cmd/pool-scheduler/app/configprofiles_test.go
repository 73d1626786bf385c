package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// TestConfigProfiles: the binary reads --config's profiles before kube-scheduler builds them, so
// NodePoolReady gets its profile's SystemPoolGuard args (#34); without a readable --config, none
// (NodePoolReady then gets the defaults, and kube-scheduler reports a bad file itself).
func TestConfigProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pool-scheduler
  pluginConfig:
  - name: SystemPoolGuard
    args:
      systemNodeSelector: {matchLabels: {example.com/system: "true"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string
		want         map[string][]string
	}{
		{name: "the profile's selector", config: path, want: map[string][]string{"pool-scheduler": {"example.com/system"}}},
		{name: "no --config"},
		{name: "unreadable", config: path + ".missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			if tt.config != "" {
				if err := cmd.Flags().Set("config", tt.config); err != nil {
					t.Fatal(err)
				}
			}
			var got map[string][]string
			for _, p := range configProfiles(cmd) {
				for _, pc := range p.PluginConfig {
					if args, ok := pc.Args.(*config.SystemPoolGuardArgs); ok {
						if got == nil {
							got = map[string][]string{}
						}
						got[p.SchedulerName] = pool.SystemNodeKeys(args)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("system-node keys by profile (-want +got):\n%s", diff)
			}
		})
	}
}
