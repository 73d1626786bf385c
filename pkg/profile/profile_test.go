package profile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLoad: one decode gives the whole configuration, the profile --scheduler-name names (the
// first for ""), and its args; every error names --config and the file.
func TestLoad(t *testing.T) {
	const path = "/etc/pool-scheduler/config.yaml"
	two := header + "- schedulerName: a\n- schedulerName: b\n  pluginConfig:\n  - name: NodePoolReady\n    args: {poolLabelKeys: [pool]}\n"
	tests := []struct {
		name          string
		config        string
		schedulerName string
		wantName      string
		wantKeys      []string
		wantErr       string
	}{
		{name: "named profile", config: two, schedulerName: "b", wantName: "b", wantKeys: []string{"pool"}},
		{name: "empty name: the first profile", config: two, wantName: "a", wantKeys: DefaultArgs().NodePoolReady.PoolLabelKeys},
		{name: "no such profile", config: two, schedulerName: "c", wantErr: `--scheduler-name "c", --config ` + path + `: no profile with schedulerName "c" (profiles: a, b)`},
		{name: "invalid args", config: header + "- schedulerName: a\n  pluginConfig:\n  - name: NodePoolReady\n    args: {labelSetNamespaces: [Not_A_Namespace]}\n",
			wantErr: "--config " + path + ": profiles[a].pluginConfig[0].args.labelSetNamespaces[0]"},
		{name: "not a configuration", config: "apiVersion: v1\nkind: ConfigMap\n", wantErr: "--config " + path + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load(path, []byte(tt.config), tt.schedulerName)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != tt.wantName || p.Path != path || len(p.Config.Profiles) != 2 {
				t.Errorf("Load: profile %q of %d, path %q; want %q of 2, %q", p.Name(), len(p.Config.Profiles), p.Path, tt.wantName, path)
			}
			if diff := cmp.Diff(tt.wantKeys, p.Args.NodePoolReady.PoolLabelKeys); diff != "" {
				t.Errorf("poolLabelKeys (-want +got):\n%s", diff)
			}
		})
	}
}
