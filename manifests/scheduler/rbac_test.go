package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// grant is one verb on one resource (and, when set, one object name) of one API group.
type grant struct{ group, resource, verb, name string }

func expand(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out[grant{g, res, v, n}] = true
					}
				}
			}
		}
	}
	return out
}

func sorted(m map[grant]bool) []string {
	var out []string
	for g := range m {
		out = append(out, g.group+"/"+g.resource+":"+g.verb+"@"+g.name)
	}
	sort.Strings(out)
	return out
}

func upstreamRole(t *testing.T, name string) []rbacv1.PolicyRule {
	t.Helper()
	for _, r := range bootstrappolicy.ClusterRoles() {
		if r.Name == name {
			return r.Rules
		}
	}
	t.Fatalf("bootstrap policy has no ClusterRole %s", name)
	return nil
}

// shipped returns the ClusterRoles and Roles of rbac.yaml by name.
func shipped(t *testing.T) (clusterRoles, roles map[string]rbacv1.ClusterRole) {
	t.Helper()
	data, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles, roles = map[string]rbacv1.ClusterRole{}, map[string]rbacv1.ClusterRole{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj rbacv1.ClusterRole // a Role has the same fields
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("rbac.yaml: %v", err)
		}
		switch obj.Kind {
		case "ClusterRole":
			clusterRoles[obj.Name] = obj
		case "Role":
			roles[obj.Name] = obj
		}
	}
	return clusterRoles, roles
}

// overlayRole returns the ClusterRole pool-scheduler as manifests/overlays/k8s-<line> builds it.
func overlayRole(t *testing.T, line string) rbacv1.ClusterRole {
	t.Helper()
	resmap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "overlays", "k8s-"+line))
	if err != nil {
		t.Fatalf("kustomize build of the %s line's overlay: %v", line, err)
	}
	for _, r := range resmap.Resources() {
		if r.GetKind() != "ClusterRole" || r.GetName() != "pool-scheduler" {
			continue
		}
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := json.Unmarshal(data, &role); err != nil {
			t.Fatal(err)
		}
		return role
	}
	t.Fatalf("the %s line's overlay has no ClusterRole pool-scheduler", line)
	return rbacv1.ClusterRole{}
}

// TestSchedulerRoleFollowsUpstream: pool-scheduler's ClusterRole is kube-scheduler's bootstrap
// roles (system:kube-scheduler and system:volume-scheduler of the Kubernetes version in
// go.mod) minus an explicit list of what it must not have, plus NodePoolLabelSets. When a new
// Kubernetes version changes the upstream roles, this fails until the change is taken over
// or excluded here, with a reason.
func TestSchedulerRoleFollowsUpstream(t *testing.T) {
	mustNotHave := map[grant]string{}
	exclude := func(reason, group, resource, name string, verbs ...string) {
		for _, v := range verbs {
			mustNotHave[grant{group, resource, v, name}] = reason
		}
	}
	const coordination = "coordination.k8s.io"
	exclude("Leases in every namespace: pool-scheduler creates its own in its namespace (the leader-election Role)",
		coordination, "leases", "", "create")
	exclude("the default scheduler's Lease", coordination, "leases", "kube-scheduler", "get", "update", "list", "watch")
	exclude("coordinated leader election is not used", coordination, "leasecandidates", "",
		"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
	exclude("VolumeBinding updates (never patches) volumes and claims; the admission policy bounds the update",
		"", "persistentvolumes", "", "patch")
	exclude("VolumeBinding updates (never patches) volumes and claims; the admission policy bounds the update",
		"", "persistentvolumeclaims", "", "patch")
	exclude("the legacy bindings resource: kube-scheduler's binder uses pods/binding, and only that passes the PodTopologyLabels admission plugin (labels copied onto the pod come from the node)",
		"", "bindings", "", "create")
	extra := expand([]rbacv1.PolicyRule{
		{APIGroups: []string{"labels.banzaicloud.io"}, Resources: []string{"nodepoollabelsets"}, Verbs: []string{"get", "list", "watch"}},
	})

	// What the upstream role of a newer release line adds (docs/compatibility.md), with the gates
	// that are on by default there: one ClusterRole serves every line, so it has them on every
	// line, and on a line of that minor or later they must be upstream's own.
	newerLines := map[int][]rbacv1.PolicyRule{
		36: {
			{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"create", "delete"}},        // DRAExtendedResource
			{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/binding"}, Verbs: []string{"update", "patch"}}, // DRAResourceClaimGranularStatusAuthorization
		},
	}
	line := version.KubernetesLine()
	minor, err := strconv.Atoi(strings.TrimPrefix(line, "1."))
	if err != nil {
		t.Fatalf("release line %q: %v", line, err)
	}

	upstream := expand(append(upstreamRole(t, "system:kube-scheduler"), upstreamRole(t, "system:volume-scheduler")...))
	want := map[grant]bool{}
	for g := range upstream {
		if _, excluded := mustNotHave[g]; !excluded {
			want[g] = true
		}
	}
	for g := range extra {
		want[g] = true
	}
	for since, rules := range newerLines {
		for g := range expand(rules) {
			if minor >= since && !upstream[g] {
				t.Errorf("line %s: %v (added for the 1.%d line) is not in the upstream role of this line: drop it or say why", line, g, since)
			}
			if minor >= since {
				want[g] = true
			} else {
				delete(want, g)
			}
		}
	}
	for g, reason := range mustNotHave {
		if !upstream[g] {
			t.Errorf("exclusion %v (%s) is not in the upstream roles any more: drop it", g, reason)
		}
	}

	clusterRoles, roles := shipped(t)
	if _, ok := clusterRoles["pool-scheduler"]; !ok {
		t.Fatal("rbac.yaml has no ClusterRole pool-scheduler")
	}
	if len(clusterRoles) != 1 {
		t.Errorf("rbac.yaml has ClusterRoles %v, want only pool-scheduler", clusterRoles)
	}
	// The role as this line installs it: its overlay over rbac.yaml.
	role := overlayRole(t, line)
	if diff := cmp.Diff(sorted(want), sorted(expand(role.Rules))); diff != "" {
		t.Errorf("ClusterRole pool-scheduler of manifests/overlays/k8s-%s differs from upstream minus exclusions (-want +got):\n%s", line, diff)
	}
	for g := range expand(role.Rules) {
		if reason, bad := mustNotHave[g]; bad {
			t.Errorf("ClusterRole pool-scheduler grants %v: %s", g, reason)
		}
	}

	le, ok := roles["pool-scheduler:leader-election"]
	if !ok {
		t.Fatal("rbac.yaml has no Role pool-scheduler:leader-election")
	}
	wantLE := expand([]rbacv1.PolicyRule{
		{APIGroups: []string{coordination}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{coordination}, Resources: []string{"leases"}, ResourceNames: []string{"pool-scheduler"}, Verbs: []string{"get", "update"}},
	})
	if diff := cmp.Diff(sorted(wantLE), sorted(expand(le.Rules))); diff != "" {
		t.Errorf("Role pool-scheduler:leader-election: its own Lease only (-want +got):\n%s", diff)
	}
}
