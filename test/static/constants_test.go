package static

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// TestConstantCopiesMatchTheGoDefinitions: CEL rules, admission policies, the chart's values and
// manifests cannot import Go, so they restate some constants. Each copy is pinned here to the one
// Go definition; change the constant and this names every copy to change with it.
func TestConstantCopiesMatchTheGoDefinitions(t *testing.T) {
	chartValues := "manifests/charts/pool-scheduler/values.yaml"
	tests := []struct {
		file string
		// what to read: a CEL list or string literal after this regexp's first group, or a
		// YAML path (keys separated by dots) when yamlPath is set.
		cel      string
		yamlPath string
		want     []string
	}{
		// The CRD's rule that a pool-identity label may only name the set's own pool.
		{file: "pkg/apis/labels/v1alpha1/types.go", cel: `k in (\[\s*'{1,2}nodepool\.banzaicloud[^\]]*\])`, want: configv1.DefaultPoolLabelKeys},
		{file: "manifests/crds/labels.banzaicloud.io_nodepoollabelsets.yaml", cel: `k in (\[\s*'{1,2}nodepool\.banzaicloud[^\]]*\])`, want: configv1.DefaultPoolLabelKeys},
		{file: "manifests/charts/pool-scheduler/crds/labels.banzaicloud.io_nodepoollabelsets.yaml", cel: `k in (\[\s*'{1,2}nodepool\.banzaicloud[^\]]*\])`, want: configv1.DefaultPoolLabelKeys},
		// The labels that take a node out of Azure's load balancers: the CRD's reserved-key rule
		// and the labeler's policy.
		{file: "pkg/apis/labels/v1alpha1/types.go", cel: `k in (\[\s*'kubernetes\.azure\.com/managed'[^\]]*\])`, want: pool.LoadBalancerExclusionKeys},
		{file: "manifests/crds/labels.banzaicloud.io_nodepoollabelsets.yaml", cel: `k in (\[\s*'kubernetes\.azure\.com/managed'[^\]]*\])`, want: pool.LoadBalancerExclusionKeys},
		{file: "manifests/charts/pool-scheduler/crds/labels.banzaicloud.io_nodepoollabelsets.yaml", cel: `k in (\[\s*'kubernetes\.azure\.com/managed'[^\]]*\])`, want: pool.LoadBalancerExclusionKeys},
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `k in (\[\s*'kubernetes\.azure\.com/managed'[^\]]*\])`, want: pool.LoadBalancerExclusionKeys},
		{file: "manifests/charts/pool-scheduler/templates/labeler-controller.yaml", cel: `k in (\[\s*'kubernetes\.azure\.com/managed'[^\]]*\])`, want: pool.LoadBalancerExclusionKeys},
		// The CRD's rule refusing the domain labeler's keys.
		{file: "pkg/apis/labels/v1alpha1/types.go", cel: `!k.startsWith\(('topology[^']*')\)`, want: []string{configv1.DomainLabelPrefix}},
		{file: "manifests/crds/labels.banzaicloud.io_nodepoollabelsets.yaml", cel: `!k.startsWith\(('topology[^']*')\)`, want: []string{configv1.DomainLabelPrefix}},
		{file: "manifests/charts/pool-scheduler/crds/labels.banzaicloud.io_nodepoollabelsets.yaml", cel: `!k.startsWith\(('topology[^']*')\)`, want: []string{configv1.DomainLabelPrefix}},
		// The labeler controller's ValidatingAdmissionPolicy.
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: identityKeys\s+expression: "(\[[^\]]*\])"`, want: configv1.DefaultPoolLabelKeys},
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: managedKey\s+expression: "('[^']*')"`, want: []string{pool.ManagedLabelsAnnotation}},
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: domainPrefix\s+expression: "('[^']*')"`, want: []string{configv1.DomainLabelPrefix}},
		{file: "manifests/charts/pool-scheduler/templates/labeler-controller.yaml", cel: `name: domainPrefix\s+expression: "('[^']*')"`, want: []string{configv1.DomainLabelPrefix}},
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: domainKeys\s+expression: "(\[[^\]]*\])"`, want: []string{configv1.UpdateDomainLabelKey, configv1.FaultDomainLabelKey}},
		// SystemPoolGuard's default systemNodeSelector (the shipped configuration's): its keys.
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: systemNodeKeys\s+expression: "(\[[^\]]*\])"`, want: []string{configv1.AKSModeLabelKey}},
		{file: "manifests/charts/pool-scheduler/templates/labeler-controller.yaml", cel: `list "(kubernetes.azure.com/mode)"`, want: []string{configv1.AKSModeLabelKey}},
		{file: "manifests/charts/pool-scheduler/templates/labeler-controller.yaml", cel: `name: managedKey\s+expression: "('[^']*')"`, want: []string{pool.ManagedLabelsAnnotation}},
		// The domain labeler's ValidatingAdmissionPolicy.
		{file: "manifests/labeler/domain/admission-policy.yaml", cel: `name: ownKeys\s+expression: "(\[[^\]]*\])"`, want: []string{configv1.UpdateDomainLabelKey, configv1.FaultDomainLabelKey}},
		// The chart's values.
		{file: chartValues, yamlPath: "scheduler.plugins.nodePoolReady.args.poolLabelKeys", want: configv1.DefaultPoolLabelKeys},
		{file: chartValues, yamlPath: "scheduler.plugins.systemPoolGuard.args.poolLabelKeys", want: configv1.DefaultPoolLabelKeys},
		{file: chartValues, yamlPath: "labeler.domain.updateDomainKey", want: []string{configv1.UpdateDomainLabelKey}},
		{file: chartValues, yamlPath: "labeler.domain.faultDomainKey", want: []string{configv1.FaultDomainLabelKey}},
		// The startup taint the labeler lifts (#46): the flag's default, the policy's key.
		{file: chartValues, yamlPath: "labeler.controller.startupTaintKey", want: []string{pool.StartupTaintKey}},
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: startupTaintKey\s+expression: "('[^']*')"`, want: []string{pool.StartupTaintKey}},
		{file: "manifests/labeler/controller/admission-policy.yaml", cel: `name: conditionType\s+expression: "('[^']*')"`, want: []string{pool.ConditionPoolLabelsApplied}},
		{file: "manifests/charts/pool-scheduler/templates/labeler-controller.yaml", cel: `name: conditionType\s+expression: "('[^']*')"`, want: []string{pool.ConditionPoolLabelsApplied}},
		// The spread keeper's eviction bound: the namespace opt-in.
		{file: "manifests/charts/pool-scheduler/templates/spread.yaml", cel: `name: optInLabel\s+expression: "('[^']*')"`, want: []string{profile.NamespaceLabel}},
		// The hand-off deletion bound: only pods admission marked as handed over.
		{file: "manifests/handoff/admission-policy.yaml", cel: `name: handedOverKey\s+expression: "('[^']*')"`, want: []string{profile.HandedOverAnnotation}},
		{file: "manifests/charts/pool-scheduler/templates/handoff-policy.yaml", cel: `name: handedOverKey\s+expression: "('[^']*')"`, want: []string{profile.HandedOverAnnotation}},
		// The webhook's namespace opt-in.
		{file: "manifests/admission/webhook/mutatingwebhookconfiguration.yaml", cel: `matchLabels:\s+(\S+): "true"`, want: []string{profile.NamespaceLabel}},
	}
	root := repoRoot(t)
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.cel+tt.yamlPath, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if tt.yamlPath != "" {
				got = yamlStrings(t, data, tt.yamlPath)
			} else {
				m := regexp.MustCompile(tt.cel).FindSubmatch(data)
				if m == nil {
					t.Fatalf("%s: no match for %q: the copy moved; update this test to find it", tt.file, tt.cel)
				}
				got = celStrings(string(m[1]))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s restates a Go constant differently (-go +file):\n%s", tt.file, diff)
			}
		})
	}
}

// celStrings reads a CEL list of string literals ("['a', 'b']") or one literal ("'a'"); a bare
// word (a YAML key) is returned as it is.
func celStrings(s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
	var out []string
	for _, e := range strings.Split(s, ",") {
		out = append(out, strings.Trim(strings.TrimSpace(e), `'"`))
	}
	return out
}

// yamlStrings reads the string or list of strings at a dotted path.
func yamlStrings(t *testing.T, data []byte, path string) []string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %q is not under a map", path, k)
		}
		v = m[k]
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			out[i], _ = e.(string)
		}
		return out
	}
	t.Fatalf("%s: %T is not a string or a list", path, v)
	return nil
}
