package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// modePackages are the packages pool-labeler's modes add themselves from (their policy); every
// other package of ours this command imports is a helper, and listed as one.
var (
	modePackages   = []string{"pkg/labeler", "pkg/domainlabeler", "pkg/admission/webhook", "pkg/handoff", "pkg/spreadkeeper", "pkg/certkeeper"}
	helperPackages = []string{"internal/tlsserving", "pkg/pool", "pkg/profile", "pkg/spreadkeeper/floor", "pkg/version", "pkg/apis/config/v1", "manifests/scheduler"}
)

// TestModeContract: every mode package has one shape (CONTRIBUTING.md, "A new pool-labeler
// mode"): options.go declares Options and (*Options).Complete(), which takes nothing (the
// scheduler's configuration is in Options.Profile), and the package starts the mode
// with SetupWithManager(mgr, Options), or Options.Run for a mode that is no manager (domain);
// every package of ours the command imports is a mode package or a listed helper.
func TestModeContract(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	known := map[string]bool{}
	for _, p := range append(append([]string{}, modePackages...), helperPackages...) {
		known[p] = true
	}
	fset := token.NewFileSet()
	imports := map[string]bool{}
	for _, f := range parseDir(t, fset, ".") {
		for _, imp := range f.file.Imports {
			if p, ok := strings.CutPrefix(strings.Trim(imp.Path.Value, `"`), "github.com/pool-scheduler/pool-scheduler/"); ok {
				imports[p] = true
			}
		}
	}
	for p := range imports {
		if !known[p] {
			t.Errorf("cmd/pool-labeler/app imports %s, which is neither a mode package nor a listed helper: give it the mode shape and list it in modePackages, or list it in helperPackages", p)
		}
	}
	for _, pkg := range modePackages {
		if !imports[pkg] {
			t.Errorf("%s is listed as a mode package, but cmd/pool-labeler/app does not import it", pkg)
		}
		var optionsType, complete, start bool
		for _, f := range parseDir(t, fset, filepath.Join(root, pkg)) {
			inOptions := filepath.Base(f.name) == "options.go"
			for _, d := range f.file.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Options" {
							if _, isStruct := ts.Type.(*ast.StructType); isStruct && inOptions {
								optionsType = true
							}
						}
					}
				case *ast.FuncDecl:
					recv := receiver(d)
					switch {
					case d.Name.Name == "Complete" && recv == "*Options" && inOptions && d.Type.Params.NumFields() == 0:
						complete = true
					case d.Name.Name == "SetupWithManager" && recv == "" && takesOptions(d):
						start = true
					case d.Name.Name == "Run" && (recv == "Options" || recv == "*Options"):
						start = true
					}
				}
			}
		}
		if !optionsType || !complete || !start {
			t.Errorf("%s: options.go declares type Options: %v, (*Options).Complete() error: %v; SetupWithManager(mgr, Options) or Options.Run: %v; want all three", pkg, optionsType, complete, start)
		}
	}
}

type parsedFile struct {
	name string
	file *ast.File
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, fset *token.FileSet, dir string) []parsedFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []parsedFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parsedFile{name: path, file: f})
	}
	return out
}

// receiver is a method's receiver type ("Options", "*Options"); "" for a function.
func receiver(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	switch t := d.Recv.List[0].Type.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		if id, ok := t.X.(*ast.Ident); ok {
			return "*" + id.Name
		}
	}
	return "?"
}

// takesOptions: the function's last parameter is of type Options.
func takesOptions(d *ast.FuncDecl) bool {
	params := d.Type.Params.List
	if len(params) == 0 {
		return false
	}
	id, ok := params[len(params)-1].Type.(*ast.Ident)
	return ok && id.Name == "Options"
}
