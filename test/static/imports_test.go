package static

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/pool-scheduler/pool-scheduler"

// listedPackage is the part of `go list -json` the import rules read.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
}

// ownerOf returns the package a `go list -test` entry belongs to: "p", "p [p.test]", "p_test"
// (its external tests) and "p.test" (their main) all belong to p; a package's tests are part
// of it.
func ownerOf(importPath string) string {
	p, _, _ := strings.Cut(importPath, " ")
	return strings.TrimSuffix(strings.TrimSuffix(p, ".test"), "_test")
}

// pluginOf returns the plugin a package of ours belongs to (pkg/plugins/<name>/...), "" for
// other packages, including pkg/plugins itself and pkg/plugins/internal/..., which every plugin
// may share.
func pluginOf(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, module+"/pkg/plugins/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	if name == "internal" {
		return ""
	}
	return name
}

func isAPI(pkg string) bool {
	return pkg == module+"/pkg/apis" || strings.HasPrefix(pkg, module+"/pkg/apis/")
}

func isOurs(pkg string) bool { return pkg == module || strings.HasPrefix(pkg, module+"/") }

// importViolations applies the import direction rules to `go list -test -json` output, with
// its tests' imports counted as the package's own:
//   - a package under pkg/apis depends on no package of ours outside pkg/apis (types, their
//     defaults and their validation are the bottom layer; everything else uses them);
//   - a plugin (pkg/plugins/<name>/...) depends on no other plugin, and pkg/plugins/internal/...
//     on none at all: what two plugins share lives in pkg/plugins/internal or below.
//
// Each violation names the dependency and the packages of ours that import it directly.
func importViolations(pkgs []listedPackage) []string {
	importers := map[string]map[string]bool{}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			imp = ownerOf(imp)
			if importers[imp] == nil {
				importers[imp] = map[string]bool{}
			}
			if by := ownerOf(p.ImportPath); by != imp {
				importers[imp][by] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		owner := ownerOf(p.ImportPath)
		internal := strings.HasPrefix(owner, module+"/pkg/plugins/internal/")
		for _, dep := range p.Deps {
			dep = ownerOf(dep)
			if !isOurs(dep) || dep == owner {
				continue
			}
			var rule string
			switch {
			case isAPI(owner) && !isAPI(dep):
				rule = "pkg/apis depends on nothing of ours outside pkg/apis"
			case pluginOf(owner) != "" && pluginOf(dep) != "" && pluginOf(dep) != pluginOf(owner):
				rule = "a plugin does not depend on another plugin"
			case internal && pluginOf(dep) != "":
				rule = "pkg/plugins/internal depends on no plugin"
			default:
				continue
			}
			var by []string
			for imp := range importers[dep] {
				by = append(by, strings.TrimPrefix(imp, module+"/"))
			}
			sort.Strings(by)
			v := fmt.Sprintf("%s depends on %s (imported by %s): %s",
				strings.TrimPrefix(owner, module+"/"), strings.TrimPrefix(dep, module+"/"), strings.Join(by, ", "), rule)
			seen[v] = true
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// goList runs `go list -e -test -json` on patterns in the repository.
func goList(t *testing.T, patterns ...string) []listedPackage {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		goBin = p
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-test", "-json"}, patterns...)...)
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportDirection keeps the layering `go list -deps` shows: pkg/apis imports nothing else of
// ours, and no plugin imports another (see importViolations).
func TestImportDirection(t *testing.T) {
	pkgs := goList(t, "./pkg/...", "./cmd/...")
	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[ownerOf(p.ImportPath)] = true
	}
	// The rules are only as good as the listing: the packages they are about must be in it.
	for _, want := range []string{"pkg/apis/config", "pkg/apis/config/v1", "pkg/apis/config/validation", "pkg/apis/labels/v1alpha1",
		"pkg/plugins/domainspread", "pkg/plugins/nodepoolready", "pkg/plugins/systempoolguard"} {
		if !listed[module+"/"+want] {
			t.Errorf("go list did not list %s", want)
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
		{ImportPath: m("pkg/apis/config"), Imports: []string{"fmt"}, Deps: []string{"fmt"}},
		{ImportPath: m("pkg/apis/config/v1"), Imports: []string{m("pkg/apis/config")}, Deps: []string{m("pkg/apis/config")}},
		// An API test importing pkg/pool counts: tests are part of the package.
		{ImportPath: m("pkg/apis/config/v1") + " [" + m("pkg/apis/config/v1") + ".test]", Imports: []string{m("pkg/pool")},
			Deps: []string{m("pkg/apis/config"), m("pkg/pool")}},
		// So does an external test package (scheme_test) of an API package.
		{ImportPath: m("pkg/apis/config/scheme_test") + " [" + m("pkg/apis/config/scheme") + ".test]", Imports: []string{m("pkg/plugins/b")},
			Deps: []string{m("pkg/plugins/b")}},
		{ImportPath: m("pkg/pool"), Imports: []string{m("pkg/apis/config")}, Deps: []string{m("pkg/apis/config")}},
		{ImportPath: m("pkg/plugins/internal/nodememo"), Deps: []string{"sync"}},
		{ImportPath: m("pkg/plugins/internal/bad"), Imports: []string{m("pkg/plugins/b")}, Deps: []string{m("pkg/plugins/b")}},
		// a reaches b through a package of its own: a transitive dependency counts.
		{ImportPath: m("pkg/plugins/a"), Imports: []string{m("pkg/plugins/a/sub"), m("pkg/plugins/internal/nodememo"), m("pkg/pool")},
			Deps: []string{m("pkg/plugins/a/sub"), m("pkg/plugins/b"), m("pkg/plugins/internal/nodememo"), m("pkg/pool"), m("pkg/apis/config")}},
		{ImportPath: m("pkg/plugins/a/sub"), Imports: []string{m("pkg/plugins/b")}, Deps: []string{m("pkg/plugins/b")}},
		{ImportPath: m("pkg/plugins/b"), Imports: []string{m("pkg/plugins/internal/nodememo")}, Deps: []string{m("pkg/plugins/internal/nodememo")}},
		// The registry imports every plugin.
		{ImportPath: m("pkg/plugins"), Imports: []string{m("pkg/plugins/a"), m("pkg/plugins/b")},
			Deps: []string{m("pkg/plugins/a"), m("pkg/plugins/b"), m("pkg/plugins/a/sub")}},
	}
	want := []string{
		"pkg/apis/config/scheme depends on pkg/plugins/b (imported by pkg/apis/config/scheme, pkg/plugins, pkg/plugins/a/sub, pkg/plugins/internal/bad): pkg/apis depends on nothing of ours outside pkg/apis",
		"pkg/apis/config/v1 depends on pkg/pool (imported by pkg/apis/config/v1, pkg/plugins/a): pkg/apis depends on nothing of ours outside pkg/apis",
		"pkg/plugins/a depends on pkg/plugins/b (imported by pkg/apis/config/scheme, pkg/plugins, pkg/plugins/a/sub, pkg/plugins/internal/bad): a plugin does not depend on another plugin",
		"pkg/plugins/a/sub depends on pkg/plugins/b (imported by pkg/apis/config/scheme, pkg/plugins, pkg/plugins/a/sub, pkg/plugins/internal/bad): a plugin does not depend on another plugin",
		"pkg/plugins/internal/bad depends on pkg/plugins/b (imported by pkg/apis/config/scheme, pkg/plugins, pkg/plugins/a/sub, pkg/plugins/internal/bad): pkg/plugins/internal depends on no plugin",
	}
	if diff := cmp.Diff(want, importViolations(pkgs)); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
