package e2e

import (
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/domainspread"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/systempoolguard"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestBinaryRefusesBadArgsOfEveryPlugin complements TestBinaryRefusesBadArgs (NodePoolReady):
// an invalid arg of SystemPoolGuard or DomainSpread stops the built binary with a non-zero exit
// and a message naming the plugin and the field. Every arg of every plugin is covered at unit
// level, through the same loading path, by cmd/pool-scheduler/app's TestEveryInvalidArgNamesTheField.
func TestBinaryRefusesBadArgsOfEveryPlugin(t *testing.T) {
	cp := util.StartControlPlane(t)
	tests := []struct {
		name   string
		plugin string
		edit   func(args map[string]any)
		// wantInOutput must all appear in the output (structured logs escape quotes).
		wantInOutput []string
	}{
		{
			name: "SystemPoolGuard namespace", plugin: systempoolguard.Name,
			edit:         func(a map[string]any) { a["systemNamespaces"] = []string{"Kube_System"} },
			wantInOutput: []string{"SystemPoolGuard", "args.systemNamespaces[0]", "Kube_System"},
		},
		{
			name: "SystemPoolGuard no system nodes", plugin: systempoolguard.Name,
			edit:         func(a map[string]any) { a["systemPools"], a["systemNodeSelector"] = []string{}, map[string]any{} },
			wantInOutput: []string{"SystemPoolGuard", "args.systemPools", "systemNodeSelector"},
		},
		{
			name: "DomainSpread maxSkew", plugin: domainspread.Name,
			edit:         func(a map[string]any) { a["mode"] = "Hard"; a["maxSkew"] = 0 },
			wantInOutput: []string{"DomainSpread", "args.maxSkew", "at least 1"},
		},
		{
			name: "DomainSpread dimension key", plugin: domainspread.Name,
			edit: func(a map[string]any) {
				a["dimensions"] = []any{map[string]any{"name": "zone", "labelKeys": []string{"not a key"}}}
			},
			wantInOutput: []string{"DomainSpread", "args.dimensions[0].labelKeys[0]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			util.ExpectBadArgsRefused(t, cp, tt.plugin, tt.edit, tt.wantInOutput)
		})
	}
}
