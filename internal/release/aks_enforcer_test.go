package release

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// TestWebhookConfigurationOptsOutOfAKSEnforcer: every MutatingWebhookConfiguration the product
// ships (each line's overlay, the kustomize webhook install, the chart with the certificate keeper
// and with cert-manager) carries admissions.enforcer/disabled: "true", so AKS's admissions
// enforcer does not rewrite its namespaceSelector (a diff for Argo CD and Flux, a field owned by
// another manager for server-side apply: docs/azure.md); and still keeps kube-system and its own
// namespace out by its own selector, which is what the enforcer would otherwise add.
func TestWebhookConfigurationOptsOutOfAKSEnforcer(t *testing.T) {
	check := func(t *testing.T, objs []map[string]any, wantNamespace string) {
		t.Helper()
		var found int
		for _, obj := range objs {
			if obj["kind"] != "MutatingWebhookConfiguration" {
				continue
			}
			found++
			name := nested(obj, "metadata", "name")
			if got := fmt.Sprint(nested(obj, "metadata", "annotations", admission.AKSEnforcerOptOut)); got != "true" {
				t.Errorf("MutatingWebhookConfiguration %v: annotation %s = %q, want \"true\"", name, admission.AKSEnforcerOptOut, got)
			}
			hooks, _ := obj["webhooks"].([]any)
			for _, h := range hooks {
				hook := h.(map[string]any)
				if hook["name"] != admission.WebhookName {
					continue // the listed namespaces' entry selects names with In
				}
				sel := fmt.Sprint(nested(hook, "namespaceSelector"))
				for _, ns := range []string{"kube-system", wantNamespace} {
					if !strings.Contains(sel, "kubernetes.io/metadata.name") || !strings.Contains(sel, ns) {
						t.Errorf("MutatingWebhookConfiguration %v: namespaceSelector %s does not keep %s out", name, sel, ns)
					}
				}
			}
		}
		if found == 0 {
			t.Fatal("no MutatingWebhookConfiguration rendered")
		}
	}

	for _, l := range releaselines.All(t) {
		t.Run("overlay "+l.Line, func(t *testing.T) {
			check(t, decodeAll(t, renderDir(t, filepath.Join(repoRoot(), LineOverlay(l.Line)))), "pool-scheduler")
		})
	}
	t.Run("kustomize webhook", func(t *testing.T) {
		check(t, decodeAll(t, renderDir(t, filepath.Join(repoRoot(), "manifests", "admission", "webhook"))), "pool-scheduler")
	})
	for name, values := range map[string]map[string]any{
		"chart certificate keeper": nil,
		"chart cert-manager": {"admission": map[string]any{"webhook": map[string]any{"certManager": map[string]any{
			"enabled": true, "issuerRef": map[string]any{"name": "ca", "kind": "ClusterIssuer"}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			ch, err := loader.Load(chartDir)
			if err != nil {
				t.Fatal(err)
			}
			kv, err := chartutil.ParseKubeVersion("v1.34.0")
			if err != nil {
				t.Fatal(err)
			}
			caps := chartutil.DefaultCapabilities.Copy()
			caps.KubeVersion = *kv
			vals, err := chartutil.ToRenderValues(ch, values,
				chartutil.ReleaseOptions{Name: "ps", Namespace: "platform", IsInstall: true}, caps)
			if err != nil {
				t.Fatal(err)
			}
			files, err := engine.Render(ch, vals)
			if err != nil {
				t.Fatal(err)
			}
			var objs []map[string]any
			for file, content := range files {
				if strings.HasSuffix(file, ".yaml") {
					objs = append(objs, decodeAll(t, []byte(content))...)
				}
			}
			check(t, objs, "platform")
			if values != nil {
				for _, obj := range objs {
					if obj["kind"] == "MutatingWebhookConfiguration" && nested(obj, "metadata", "annotations", "cert-manager.io/inject-ca-from") == nil {
						t.Errorf("with cert-manager the configuration lost cert-manager.io/inject-ca-from")
					}
				}
			}
		})
	}
}
