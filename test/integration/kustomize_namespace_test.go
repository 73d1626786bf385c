package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestKustomizeNamespaceOverlayKeepsPoliciesBound builds each kustomization that ships a
// ValidatingAdmissionPolicy under an overlay that moves it to another namespace (kustomize
// namespace:), and under one that also prefixes every name (namePrefix:), as users do, and
// evaluates every policy's matchConditions (CEL, with the renamed account's username) for the
// ServiceAccount it bounds: each must still match it, and match none of the overlay's other
// accounts. A policy naming system:serviceaccount:pool-scheduler:<name> literally leaves the
// renamed writer unbounded (the overlay renames the account, not a string in CEL).
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
	seen := map[string]bool{}
	for _, dir := range []string{"manifests", "manifests/labeler/domain", "manifests/admission/webhook"} {
		for _, prefix := range []string{"", "team-"} {
			t.Run(dir+"/namePrefix="+prefix, func(t *testing.T) {
				checkOverlayPolicies(t, env, dir, namespace, prefix, bounded, seen)
			})
		}
	}
	for name := range bounded {
		if !seen[name] {
			t.Errorf("policy %s was not found in the kustomizations", name)
		}
	}
}

// checkOverlayPolicies builds dir under an overlay setting namespace and namePrefix and checks
// that every policy naming a ServiceAccount matches its own renamed account and no other.
func checkOverlayPolicies(t *testing.T, env *cel.Env, dir, namespace, prefix string, bounded map[string]string, seen map[string]bool) {
	t.Helper()
	overlay := t.TempDir()
	// kustomize takes a base by a relative path only.
	base, err := filepath.Rel(overlay, filepath.Join(util.RepoRoot(), dir))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nnamePrefix: %q\nresources:\n- %s\n",
		namespace, prefix, base)
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
			accounts = append(accounts, "system:serviceaccount:"+o.GetNamespace()+":"+o.GetName())
		}
	}
	serviceAccountUser := regexp.MustCompile(`system:serviceaccount:`)
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
		name := strings.TrimPrefix(o.GetName(), prefix)
		account, ok := bounded[name]
		if !ok {
			t.Errorf("policy %s matches a ServiceAccount this test does not know: add it to bounded", o.GetName())
			continue
		}
		seen[name] = true
		user := "system:serviceaccount:" + namespace + ":" + prefix + account
		if !slices.Contains(accounts, user) {
			t.Errorf("the overlay has no ServiceAccount %s for policy %s (it has %v)", user, o.GetName(), accounts)
		}
		if !matchesAll(t, env, exprs, user) {
			t.Errorf("policy %s, moved to namespace %s with namePrefix %q, does not match its writer %s: %v", o.GetName(), namespace, prefix, user, exprs)
		}
		for _, other := range accounts {
			if other != user && matchesAll(t, env, exprs, other) {
				t.Errorf("policy %s also bounds %s, which it does not name", o.GetName(), other)
			}
		}
	}
}

// matchesAll evaluates every match condition for a request by user.
func matchesAll(t *testing.T, env *cel.Env, exprs []string, user string) bool {
	t.Helper()
	for _, e := range exprs {
		ast, iss := env.Compile(e)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", e, iss.Err())
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
		if err != nil {
			t.Fatalf("%s for %s: %v", e, user, err)
		}
		if out.Value() != true {
			return false
		}
	}
	return true
}
