package integration

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
)

// TestHelmChartLabelerPolicyKeys: the labeler controller's admission policy refuses, whatever a
// write declares managed, the labels SystemPoolGuard's systemNodeSelector reads and the domain
// labeler's keys; the chart derives both lists from its values, so a changed selector or domain
// key is refused too, and an empty selector ({}) refuses none. The labeler, reading the
// scheduler's rendered configuration, ignores the same system-node keys in label sets.
func TestHelmChartLabelerPolicyKeys(t *testing.T) {
	tests := []struct {
		name, values                    string
		wantSystemNodeKeys, wantDomains string
	}{
		{name: "defaults: AKS's system-mode label",
			wantSystemNodeKeys: "['kubernetes.azure.com/mode']",
			wantDomains:        "['topology.pool-scheduler.io/update-domain', 'topology.pool-scheduler.io/fault-domain']"},
		{name: "a selector of labels and expressions",
			values:             `scheduler: {plugins: {systemPoolGuard: {args: {systemNodeSelector: {matchLabels: {example.com/system: "true", example.com/tier: sys}, matchExpressions: [{key: example.com/role, operator: In, values: [system]}, {key: example.com/tier, operator: Exists}]}}}}}`,
			wantSystemNodeKeys: "['example.com/system', 'example.com/tier', 'example.com/role']",
			wantDomains:        "['topology.pool-scheduler.io/update-domain', 'topology.pool-scheduler.io/fault-domain']"},
		{name: "no selector",
			values:             `scheduler: {plugins: {systemPoolGuard: {args: {systemNodeSelector: {}}}}}`,
			wantSystemNodeKeys: "[]",
			wantDomains:        "['topology.pool-scheduler.io/update-domain', 'topology.pool-scheduler.io/fault-domain']"},
		{name: "domain keys of one's own",
			values:             `labeler: {domain: {updateDomainKey: example.com/ud, faultDomainKey: example.com/fd}}`,
			wantSystemNodeKeys: "['kubernetes.azure.com/mode']",
			wantDomains:        "['example.com/ud', 'example.com/fd']"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderChart(t, chartNamespace, tt.values)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			vars, _, _ := unstructured.NestedSlice(r.get(t, "ValidatingAdmissionPolicy", "pool-labeler-managed-labels").Object, "spec", "variables")
			got := map[string]any{}
			for _, v := range vars {
				m := v.(map[string]any)
				got[m["name"].(string)] = m["expression"]
			}
			want := map[string]any{"systemNodeKeys": tt.wantSystemNodeKeys, "domainKeys": tt.wantDomains, "domainPrefix": "'topology.pool-scheduler.io/'"}
			if diff := cmp.Diff(want, map[string]any{"systemNodeKeys": got["systemNodeKeys"], "domainKeys": got["domainKeys"], "domainPrefix": got["domainPrefix"]}); diff != "" {
				t.Errorf("policy variables (-want +got):\n%s", diff)
			}
			// The labeler ignores, in label sets, the keys the policy refuses (#34): it reads them
			// from the scheduler's ConfigMap, which the chart renders from the same values.
			data, _, _ := unstructured.NestedString(r.get(t, "ConfigMap", "pool-scheduler-config").Object, "data", "config.yaml")
			gate, _, err := labeler.GateFromSchedulerConfig([]byte(data), "")
			if err != nil {
				t.Fatalf("the labeler reading the rendered config: %v", err)
			}
			var policyKeys []string
			for _, k := range strings.Split(strings.Trim(tt.wantSystemNodeKeys, "[]"), ",") {
				if k = strings.Trim(strings.TrimSpace(k), "'"); k != "" {
					policyKeys = append(policyKeys, k)
				}
			}
			if diff := cmp.Diff(policyKeys, gate.SystemNodeKeys, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the labeler's system-node keys differ from the policy's (-policy +labeler):\n%s", diff)
			}
		})
	}
}
