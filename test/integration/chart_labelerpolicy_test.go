package integration

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/test/util"
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
		{name: "domain keys of one's own (under topology.pool-scheduler.io/, TestHelmChartDomainKeysUnderPrefix)",
			values:             `labeler: {domain: {updateDomainKey: topology.pool-scheduler.io/ud, faultDomainKey: topology.pool-scheduler.io/fd}}`,
			wantSystemNodeKeys: "['kubernetes.azure.com/mode']",
			wantDomains:        "['topology.pool-scheduler.io/ud', 'topology.pool-scheduler.io/fd']"},
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

// TestHelmChartDomainKeysUnderPrefix (#34): the domain labeler's keys must lie under
// topology.pool-scheduler.io/. The labeler controller's admission policy refuses writes to them
// (domainKeys) whatever a write declares managed, but only keys under that prefix are kept out of
// NodePoolLabelSets (the CRD, pool.RefusedKey): a set naming another one would have every write
// to its pool refused, and the pool held forever. The schema refuses such a key, and so do the
// templates (for installs that skip schema validation), with a message saying why; also with the
// domain labeler off, since the controller's policy still lists the keys.
func TestHelmChartDomainKeysUnderPrefix(t *testing.T) {
	tests := []struct{ name, values, value string }{
		{name: "update domain", values: `labeler: {domain: {updateDomainKey: example.com/ud}}`, value: "updateDomainKey"},
		{name: "fault domain", values: `labeler: {domain: {faultDomainKey: example.com/fd}}`, value: "faultDomainKey"},
		{name: "a reserved key", values: `labeler: {domain: {updateDomainKey: topology.kubernetes.io/zone}}`, value: "updateDomainKey"},
		{name: "domain labeler off", values: `labeler: {domain: {enabled: false, faultDomainKey: example.com/fd}}`, value: "faultDomainKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, chartNamespace, tt.values)
			if err == nil || !strings.Contains(err.Error(), "/labeler/domain/"+tt.value) {
				t.Errorf("schema: %v, want an error naming /labeler/domain/%s", err, tt.value)
			}
			// Without the schema (helm --skip-schema-validation) the templates refuse it.
			ch, err := loader.Load(util.ChartDir())
			if err != nil {
				t.Fatal(err)
			}
			ch.Schema = nil
			overrides, err := chartutil.ReadValues([]byte(tt.values))
			if err != nil {
				t.Fatal(err)
			}
			caps := chartutil.DefaultCapabilities.Copy()
			kv, err := chartutil.ParseKubeVersion(chartKube)
			if err != nil {
				t.Fatal(err)
			}
			caps.KubeVersion = *kv
			vals, err := chartutil.ToRenderValues(ch, overrides, chartutil.ReleaseOptions{Name: chartRelease, Namespace: chartNamespace, IsInstall: true, Revision: 1}, caps)
			if err != nil {
				t.Fatal(err)
			}
			_, err = engine.Engine{Strict: true}.Render(ch, vals)
			if want := "labeler.domain." + tt.value; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "is not under topology.pool-scheduler.io/") {
				t.Errorf("templates: %v, want an error naming %s and the prefix", err, want)
			}
		})
	}
	// Keys of one's own under the prefix, and no fault-domain key, render.
	for _, values := range []string{
		`labeler: {domain: {updateDomainKey: topology.pool-scheduler.io/ud, faultDomainKey: topology.pool-scheduler.io/fd}}`,
		`labeler: {domain: {faultDomainKey: ""}}`,
	} {
		if _, err := renderChart(t, chartNamespace, values); err != nil {
			t.Errorf("%s: %v", values, err)
		}
	}
}
