package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestKustomizeNamespaceOverlayKeepsPoliciesBound builds each kustomization that ships a
// ValidatingAdmissionPolicy under an overlay that moves it to another namespace (kustomize
// namespace:), as users do, and evaluates every policy's matchConditions (CEL, with the
// renamed account's username) for the ServiceAccount it bounds: each must still match it. A
// policy naming system:serviceaccount:pool-scheduler:<name> literally leaves the renamed writer
// unbounded (the overlay renames the account, not a string in CEL).
func TestKustomizeNamespaceOverlayKeepsPoliciesBound(t *testing.T) {
	const namespace = "platform-scheduling"
	// The account each policy that bounds one account bounds. A policy matching a
	// system:serviceaccount username that is not listed here fails the test: add it.
	bounded := map[string]string{
		"pool-labeler-managed-labels":         "pool-labeler",
		"pool-labeler-domain-own-node":        "pool-labeler-domain",
		"pool-labeler-domain-own-node-events": "pool-labeler-domain",
		"pool-scheduler-volume-binding":       "pool-scheduler",
		"pool-scheduler-pod-writes":           "pool-scheduler",
		"pool-scheduler-webhook-ca-bundle":    "pool-scheduler-certs",
		"pool-scheduler-spread-deletion-cost": "pool-scheduler-spread",
		"pool-scheduler-handoff-deletes":      "pool-scheduler-handoff",
	}
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType), cel.Variable("params", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	serviceAccountUser := regexp.MustCompile(`system:serviceaccount:`)
	seen := map[string]bool{}
	for _, dir := range []string{"manifests", "manifests/labeler/domain", "manifests/admission/webhook"} {
		t.Run(dir, func(t *testing.T) {
			overlay := t.TempDir()
			// kustomize takes a base by a relative path only.
			base, err := filepath.Rel(overlay, filepath.Join(util.RepoRoot(), dir))
			if err != nil {
				t.Fatal(err)
			}
			kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n- %s\n",
				namespace, base)
			if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
				t.Fatal(err)
			}
			resmap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
			if err != nil {
				t.Fatalf("kustomize build of an overlay of %s: %v", dir, err)
			}
			var objs []*unstructured.Unstructured
			for _, r := range resmap.Resources() {
				m, err := r.Map()
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
			var accounts []string
			for _, o := range objs {
				if o.GetKind() == "ServiceAccount" {
					accounts = append(accounts, o.GetNamespace()+"/"+o.GetName())
				}
			}
			for _, o := range objs {
				if o.GetKind() != "ValidatingAdmissionPolicy" {
					continue
				}
				conds, _, _ := unstructured.NestedSlice(o.Object, "spec", "matchConditions")
				var exprs []string
				names := false
				for _, c := range conds {
					e, _ := c.(map[string]any)["expression"].(string)
					exprs = append(exprs, e)
					names = names || serviceAccountUser.MatchString(e)
				}
				if !names {
					continue
				}
				account, ok := bounded[o.GetName()]
				if !ok {
					t.Errorf("policy %s matches a ServiceAccount this test does not know: add it to bounded", o.GetName())
					continue
				}
				seen[o.GetName()] = true
				if !slices.Contains(accounts, namespace+"/"+account) {
					t.Errorf("the overlay has no ServiceAccount %s/%s for policy %s (it has %v)", namespace, account, o.GetName(), accounts)
				}
				user := "system:serviceaccount:" + namespace + ":" + account
				for _, e := range exprs {
					ast, iss := env.Compile(e)
					if iss.Err() != nil {
						t.Fatalf("policy %s: %s: %v", o.GetName(), e, iss.Err())
					}
					prg, err := env.Program(ast)
					if err != nil {
						t.Fatal(err)
					}
					out, _, err := prg.Eval(map[string]any{
						"request":   map[string]any{"userInfo": map[string]any{"username": user}},
						"object":    map[string]any{},
						"oldObject": map[string]any{},
						"params":    map[string]any{},
					})
					if err != nil || out.Value() != true {
						t.Errorf("policy %s, moved to namespace %s, does not match its writer %s: %s is %v (%v)", o.GetName(), namespace, user, e, out, err)
					}
				}
			}
		})
	}
	for name := range bounded {
		if !seen[name] {
			t.Errorf("policy %s was not found in the kustomizations", name)
		}
	}
}
