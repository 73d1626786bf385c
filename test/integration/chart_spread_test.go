package integration

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmChartSpread: the spread keeper's Deployment follows spread.* values: deletion costs on
// and the rebalancer off by default, the rebalancer's dry run on when it is enabled, its caps
// passed on, the budget floor off by default and alone enough to run; the eviction right and its policy only when the rebalancer evicts; nothing is
// rendered without DomainSpread or with spread.enabled false; nothing to run is refused.
func TestHelmChartSpread(t *testing.T) {
	tests := []struct {
		name     string
		values   string
		wantArgs []string // nil: no spread keeper rendered
		wantErr  string
		// wantEvict: the ClusterRole grants pods/eviction and the eviction policy is rendered.
		wantEvict bool
	}{
		{name: "defaults", wantArgs: []string{"spread", "--scheduler-name=pool-scheduler", "--deletion-cost=true", "--deletion-cost-rate=20", "--rebalance=false", "--budget-floor=false"}},
		{name: "rebalancer on: dry run first", values: `spread: {rebalance: {enabled: true, interval: 30s}}`,
			wantArgs: []string{"--deletion-cost=true", "--rebalance=true", "--rebalance-dry-run=true", "--rebalance-interval=30s", "--rebalance-cooldown=5m"}},
		{name: "rebalancer only", values: `spread: {deletionCost: {enabled: false}, rebalance: {enabled: true, dryRun: false}}`,
			wantArgs: []string{"--deletion-cost=false", "--rebalance=true", "--rebalance-dry-run=false", "--rebalance-max-backoff=1h",
				"--rebalance-max-per-pass=5", "--rebalance-max-per-node=1", "--rebalance-max-per-namespace=2"}, wantEvict: true},
		{name: "caps", values: `spread: {rebalance: {enabled: true, dryRun: false, maxPerPass: 20, maxPerNode: 2, maxPerNamespace: 4, maxBackoff: 2h}}`,
			wantArgs: []string{"--rebalance-max-backoff=2h", "--rebalance-max-per-pass=20", "--rebalance-max-per-node=2", "--rebalance-max-per-namespace=4"}, wantEvict: true},
		{name: "the budget floor alone", values: `spread: {deletionCost: {enabled: false}, budgetFloor: {enabled: true}}`,
			wantArgs: []string{"--deletion-cost=false", "--rebalance=false", "--budget-floor=true"}},
		{name: "a cap of 0 refused", values: `spread: {rebalance: {maxPerNode: 0}}`, wantErr: "maxPerNode"},
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
			evicts := false
			for _, o := range r.objects {
				if o.GetName() == "pool-scheduler-spread-evictions" {
					evicts = true
				}
				if o.GetKind() == "ClusterRole" && o.GetName() == "pool-scheduler-spread" {
					rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
					granted := false
					for _, rule := range rules {
						res, _, _ := unstructured.NestedStringSlice(rule.(map[string]any), "resources")
						granted = granted || containsString(res, "pods/eviction")
					}
					if granted != tt.wantEvict {
						t.Errorf("ClusterRole grants pods/eviction: %v, want %v", granted, tt.wantEvict)
					}
				}
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
			if evicts != tt.wantEvict {
				t.Errorf("eviction policy rendered: %v, want %v", evicts, tt.wantEvict)
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
