package integration

import (
	"strings"
	"testing"
)

// TestHelmChartSpread: the spread keeper's Deployment follows spread.* values: deletion costs on
// and the rebalancer off by default, the rebalancer's dry run on when it is enabled; nothing is
// rendered without DomainSpread or with spread.enabled false; nothing to run is refused.
func TestHelmChartSpread(t *testing.T) {
	tests := []struct {
		name     string
		values   string
		wantArgs []string // nil: no spread keeper rendered
		wantErr  string
	}{
		{name: "defaults", wantArgs: []string{"spread", "--scheduler-name=pool-scheduler", "--deletion-cost=true", "--deletion-cost-rate=20", "--rebalance=false"}},
		{name: "rebalancer on: dry run first", values: `spread: {rebalance: {enabled: true, interval: 30s}}`,
			wantArgs: []string{"--deletion-cost=true", "--rebalance=true", "--rebalance-dry-run=true", "--rebalance-interval=30s", "--rebalance-cooldown=5m"}},
		{name: "rebalancer only", values: `spread: {deletionCost: {enabled: false}, rebalance: {enabled: true, dryRun: false}}`,
			wantArgs: []string{"--deletion-cost=false", "--rebalance=true", "--rebalance-dry-run=false"}},
		{name: "custom scheduler name", values: `scheduler: {name: nodepools}`, wantArgs: []string{"--scheduler-name=nodepools"}},
		{name: "off", values: `spread: {enabled: false}`},
		{name: "DomainSpread off", values: `scheduler: {plugins: {domainSpread: {enabled: false}}}`},
		{name: "nothing to run", values: `spread: {deletionCost: {enabled: false}}`, wantErr: "nothing to run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderChart(t, chartNamespace, tt.values)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("rendering: %v, want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			var found []string
			for _, o := range r.objects {
				if strings.HasSuffix(o.GetName(), "-spread") || strings.HasSuffix(o.GetName(), "-spread-deletion-cost") {
					found = append(found, objectID(o))
					if o.GetKind() == "Deployment" && tt.wantArgs != nil {
						args := containerArgs(t, o)
						for _, want := range tt.wantArgs {
							if !containsString(args, want) {
								t.Errorf("spread keeper args %q lack %s", args, want)
							}
						}
					}
				}
			}
			if tt.wantArgs == nil && len(found) > 0 {
				t.Errorf("rendered %v, want no spread keeper", found)
			}
			if tt.wantArgs != nil && len(found) != 8 {
				t.Errorf("rendered %v, want the spread keeper's 8 objects", found)
			}
		})
	}
}
