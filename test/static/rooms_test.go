package static

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A room is a set of packages with one purpose; its doors are the rooms its packages may import
// (a package's tests count as the package). The table is the layout as intended: TestImports
// holds the code to it, and docs/architecture.md draws it (TestArchitectureDoc).
type room struct {
	name     string
	prefixes []string // import paths below the module; a prefix ending in "/" matches the subtree
	purpose  string
	doors    []string
}

// rooms lists every package of ours, from the bottom up. A plugin's room holds one plugin
// (pkg/plugins/<name>/...): plugins share nothing but the rooms below them.
var rooms = []room{
	{name: "apis", prefixes: []string{"pkg/apis/"}, purpose: "plugin args (types, v1 defaults, validation, the scheme) and the NodePoolLabelSet API"},
	{name: "compat", prefixes: []string{"internal/compat/"}, purpose: "the scheduler plugin API on every Kubernetes line"},
	{name: "version", prefixes: []string{"pkg/version"}, purpose: "build and release-line identity"},
	{name: "serving", prefixes: []string{"internal/tlsserving"}, purpose: "what every HTTPS server of ours shares (HTTP/1.1 only)"},
	{name: "manifests", prefixes: []string{"manifests/"}, purpose: "the shipped configuration and CRDs, embedded for tools and tests", doors: []string{"version"}},
	{name: "controlplane", prefixes: []string{"pkg/controlplane"}, purpose: "etcd and kube-apiserver in process", doors: []string{"apis", "manifests"}},
	{name: "kubesim", prefixes: []string{"pkg/kubesim"}, purpose: "ReplicaSet and disruption controllers and a kubelet stand-in, in process", doors: []string{"controlplane"}},
	{name: "pool", prefixes: []string{"pkg/pool"}, purpose: "which pool, is it ready, is it a system node: for everyone", doors: []string{"apis"}},
	{name: "maintenance", prefixes: []string{"pkg/maintenance"}, purpose: "AKS and autoscaler maintenance on nodes: generations, upgrades under way, each node's fate", doors: []string{"pool"}},
	{name: "spread", prefixes: []string{"pkg/spread"}, purpose: "what placement, the spread keeper and the report agree on: skew, the pod-deletion-cost ranking"},
	{name: "plugin-kit", prefixes: []string{"pkg/plugins/internal/"}, purpose: "what plugins share (the per-node memo)", doors: []string{"compat"}},
	{name: "test-kit", prefixes: []string{"test/util/plugintest", "test/util/podfixture", "test/util/releaselines"}, purpose: "light helpers for unit tests", doors: []string{"apis", "compat", "manifests"}},
	{name: "plugin", prefixes: []string{"pkg/plugins/domainspread", "pkg/plugins/nodepoolaffinity", "pkg/plugins/nodepoolready", "pkg/plugins/systempoolguard"}, purpose: "one scheduler plugin each; none imports another", doors: []string{"apis", "compat", "maintenance", "pool", "plugin-kit", "spread", "test-kit"}},
	{name: "registry", prefixes: []string{"pkg/plugins"}, purpose: "the plugins' registry", doors: []string{"apis", "compat", "manifests", "plugin"}},
	{name: "profile", prefixes: []string{"pkg/profile"}, purpose: "the scheduler profile as tools read it: config file or ConfigMap, args defaulted and validated", doors: []string{"apis"}},
	{name: "azurelb", prefixes: []string{"pkg/azurelb"}, purpose: "how a Service's load-balancer backend pool is built: Azure's cloud-provider model, the provider-neutral annotation", doors: []string{"pool"}},
	{name: "report", prefixes: []string{"pkg/report"}, purpose: "placement measurements: readiness, system pools, spread, load balancers", doors: []string{"apis", "azurelb", "maintenance", "pool", "profile", "spread"}},
	{name: "certkeeper", prefixes: []string{"pkg/certkeeper"}, purpose: "CAs apart from serving Secrets: rotation with overlap, serving certificates, CA bundles"},
	{name: "heartbeat", prefixes: []string{"pkg/heartbeat"}, purpose: "what pool-scheduler's leader publishes of its scheduling loop on its Lease"},
	{name: "handoff", prefixes: []string{"pkg/handoff"}, purpose: "whether pods are handed to pool-scheduler (leader, its heartbeat, version skew) and handing stranded pods back", doors: []string{"heartbeat", "profile", "test-kit", "version"}},
	{name: "admission", prefixes: []string{"pkg/admission"}, purpose: "the admission path: mutator, policies, webhook", doors: []string{"apis", "compat", "handoff", "pool", "profile", "serving", "version"}},
	{name: "labeler", prefixes: []string{"pkg/labeler"}, purpose: "NodePoolLabelSet reconciler", doors: []string{"apis", "pool", "profile"}},
	{name: "domainlabeler", prefixes: []string{"pkg/domainlabeler"}, purpose: "Azure platform fault and update domains onto the node (instance metadata)", doors: []string{"apis"}},
	{name: "spreadkeeper", prefixes: []string{"pkg/spreadkeeper"}, purpose: "spread after placement: deletion costs for scale-downs, rebalancing by eviction", doors: []string{"apis", "compat", "handoff", "maintenance", "pool", "profile", "spread", "test-kit"}},
	{name: "aksemu", prefixes: []string{"pkg/aksemu"}, purpose: "AKS and Karpenter node operations emulated (surge and blue-green upgrades, consolidation, drains through the Eviction API): an UpgradePlan run against an API server", doors: []string{"maintenance", "pool"}},
	{name: "simulate", prefixes: []string{"pkg/simulate"}, purpose: "scenarios run under both schedulers, their rendering and the maintenance goals", doors: []string{"admission", "aksemu", "apis", "azurelb", "controlplane", "kubesim", "manifests", "pool", "profile", "registry", "report", "spreadkeeper"}},
	{name: "poolctl", prefixes: []string{"pkg/poolctl"}, purpose: "status, audit and simulate commands", doors: []string{"apis", "azurelb", "handoff", "pool", "profile", "report", "simulate", "version"}},
	{name: "commands", prefixes: []string{"cmd/"}, purpose: "pool-scheduler, pool-labeler, poolctl: flags and start-up", doors: []string{"admission", "apis", "certkeeper", "compat", "domainlabeler", "handoff", "heartbeat", "labeler", "manifests", "pool", "poolctl", "profile", "registry", "serving", "spreadkeeper", "version"}},
	{name: "release", prefixes: []string{"internal/ociimage", "internal/release", "hack/"}, purpose: "image, release files, generators, report tools (not shipped)", doors: []string{"admission", "test-kit"}},
	{name: "tests", prefixes: []string{"test/"}, purpose: "integration, e2e, image, perf, static checks and their helpers", doors: []string{"*"}},
}

// roomOf returns the room of a package of ours (import path below the module) and, for a plugin,
// which plugin; the longest matching prefix wins.
func roomOf(pkg string) (r *room, instance string) {
	best := -1
	for i := range rooms {
		for _, p := range rooms[i].prefixes {
			if (pkg == strings.TrimSuffix(p, "/") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "/")+"/")) && len(p) > best {
				r, best = &rooms[i], len(p)
				instance = strings.TrimSuffix(p, "/")
			}
		}
	}
	if r != nil && r.name != "plugin" {
		instance = ""
	}
	return r, instance
}

func (r *room) opens(to string) bool {
	for _, d := range r.doors {
		if d == "*" || d == to {
			return true
		}
	}
	return false
}

// importViolations holds `go list -test -json` output to the table: each direct import of a
// package of ours must go through a door of the importer's room, or stay in its room (in one
// plugin, for plugins). A package in no room is a violation too: the table must name it.
func importViolations(pkgs []listedPackage) []string {
	seen := map[string]bool{}
	short := func(p string) string { return strings.TrimPrefix(p, module+"/") }
	for _, p := range pkgs {
		owner := short(ownerOf(p.ImportPath))
		from, fromPlugin := roomOf(owner)
		if from == nil {
			seen[fmt.Sprintf("%s is in no room of test/static's table: add it", owner)] = true
			continue
		}
		for _, imp := range p.Imports {
			imp = ownerOf(imp)
			if !isOurs(imp) || short(imp) == owner {
				continue
			}
			to, toPlugin := roomOf(short(imp))
			switch {
			case to == nil:
				seen[fmt.Sprintf("%s is in no room of test/static's table: add it", short(imp))] = true
			case to == from && fromPlugin == toPlugin:
			case to == from && from.name == "plugin":
				seen[fmt.Sprintf("%s imports %s: a plugin does not import another plugin", owner, short(imp))] = true
			case to != from && !from.opens(to.name):
				seen[fmt.Sprintf("%s imports %s: room %s has no door to room %s", owner, short(imp), from.name, to.name)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// TestImports holds every package of ours to the rooms table.
func TestImports(t *testing.T) {
	pkgs := goList(t, "./...")
	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[strings.TrimPrefix(ownerOf(p.ImportPath), module+"/")] = true
	}
	// The rules are only as good as the listing: every room's packages must be in it.
	for _, r := range rooms {
		for _, p := range r.prefixes {
			found := false
			for l := range listed {
				if l == strings.TrimSuffix(p, "/") || strings.HasPrefix(l, p) {
					found = true
				}
			}
			if !found {
				t.Errorf("room %s: no package %s in go list's output (a stale row?)", r.name, p)
			}
		}
	}
	for _, v := range importViolations(pkgs) {
		t.Error(v)
	}
}

// TestImportViolations checks the rules themselves on a made-up import graph.
func TestImportViolations(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []listedPackage{
		{ImportPath: m("pkg/apis/config"), Imports: []string{"fmt"}},
		{ImportPath: m("pkg/apis/config/v1"), Imports: []string{m("pkg/apis/config")}},
		// An API test importing pkg/pool counts: tests are part of the package.
		{ImportPath: m("pkg/apis/config/v1") + " [" + m("pkg/apis/config/v1") + ".test]", Imports: []string{m("pkg/pool")}},
		// So does an external test package of an API package.
		{ImportPath: m("pkg/apis/config/scheme_test") + " [" + m("pkg/apis/config/scheme") + ".test]", Imports: []string{m("pkg/plugins/nodepoolready")}},
		{ImportPath: m("pkg/pool"), Imports: []string{m("pkg/apis/config")}},
		{ImportPath: m("pkg/plugins/internal/nodememo"), Imports: []string{m("pkg/plugins/domainspread")}},
		{ImportPath: m("pkg/plugins/domainspread"), Imports: []string{m("pkg/plugins/domainspread/sub"), m("pkg/plugins/internal/nodememo"), m("pkg/pool")}},
		{ImportPath: m("pkg/plugins/domainspread/sub"), Imports: []string{m("pkg/plugins/nodepoolready")}},
		{ImportPath: m("pkg/plugins"), Imports: []string{m("pkg/plugins/domainspread"), m("pkg/plugins/nodepoolready")}},
		{ImportPath: m("pkg/report"), Imports: []string{m("pkg/admission")}},
		{ImportPath: m("pkg/unplanned"), Imports: []string{m("pkg/pool")}},
		{ImportPath: m("test/integration"), Imports: []string{m("pkg/plugins/domainspread"), m("cmd/poolctl")}},
	}
	want := []string{
		"pkg/apis/config/scheme imports pkg/plugins/nodepoolready: room apis has no door to room plugin",
		"pkg/apis/config/v1 imports pkg/pool: room apis has no door to room pool",
		"pkg/plugins/domainspread/sub imports pkg/plugins/nodepoolready: a plugin does not import another plugin",
		"pkg/plugins/internal/nodememo imports pkg/plugins/domainspread: room plugin-kit has no door to room plugin",
		"pkg/report imports pkg/admission: room report has no door to room admission",
		"pkg/unplanned is in no room of test/static's table: add it",
	}
	if diff := cmp.Diff(want, importViolations(pkgs)); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

var update = flag.Bool("update", false, "rewrite docs/architecture.md's generated part from the rooms table")

const (
	diagramBegin = "<!-- BEGIN generated by test/static TestArchitectureDoc; make generate -->"
	diagramEnd   = "<!-- END generated -->"
)

// architecture renders the rooms table as a Mermaid diagram (arrows point from importer to
// imported, so the bottom of the house is at the bottom) and a table.
func architecture() string {
	var b strings.Builder
	b.WriteString(diagramBegin + "\n\n```mermaid\nflowchart BT\n")
	for _, r := range rooms {
		fmt.Fprintf(&b, "  %s[\"%s<br/><small>%s</small>\"]\n", strings.ReplaceAll(r.name, "-", "_"), r.name, strings.Join(r.prefixes, " "))
	}
	for _, r := range rooms {
		for _, d := range r.doors {
			if d == "*" {
				continue
			}
			fmt.Fprintf(&b, "  %s --> %s\n", strings.ReplaceAll(r.name, "-", "_"), strings.ReplaceAll(d, "-", "_"))
		}
	}
	b.WriteString("```\n\n| room | packages | what for | may import |\n|---|---|---|---|\n")
	for _, r := range rooms {
		doors := strings.Join(r.doors, ", ")
		if doors == "*" {
			doors = "everything"
		} else if doors == "" {
			doors = "nothing of ours"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", r.name, strings.Join(r.prefixes, "`, `"), r.purpose, doors)
	}
	b.WriteString("\n" + diagramEnd)
	return b.String()
}

// TestArchitectureDoc: docs/architecture.md draws the rooms table as it is (run make generate).
func TestArchitectureDoc(t *testing.T) {
	path := filepath.Join(repoRoot(t), "docs", "architecture.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, diagramBegin), strings.Index(doc, diagramEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no generated part between %q and %q", path, diagramBegin, diagramEnd)
	}
	want := doc[:i] + architecture() + doc[j+len(diagramEnd):]
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("%s is not the rooms table; run make generate (-want +got):\n%s", path, diff)
	}
}

func isOurs(pkg string) bool { return pkg == module || strings.HasPrefix(pkg, module+"/") }
