package static

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// definedMetric is a metric whose options literal was found in the source.
type definedMetric struct {
	name string
	pos  string
}

// optsTypes are the options structs of k8s.io/component-base/metrics and client_golang.
var optsTypes = map[string]bool{
	"CounterOpts": true, "GaugeOpts": true, "HistogramOpts": true, "SummaryOpts": true,
	"TimingHistogramOpts": true, "NativeHistogramOpts": true,
}

// scanMetrics finds every metric defined in the non-test Go files under dirs: options literals
// (Namespace_Subsystem_Name) and NewDesc calls. Files that register metrics but define none the
// scanner can read are reported, so a metric written in a new style cannot slip past.
func scanMetrics(t *testing.T, root string, dirs ...string) []definedMetric {
	t.Helper()
	var out []definedMetric
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			consts := stringConsts(f)
			importsMetrics := false
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				importsMetrics = importsMetrics || strings.HasPrefix(p, "k8s.io/component-base/metrics") ||
					strings.HasPrefix(p, "github.com/prometheus/client_golang") || strings.HasPrefix(p, "sigs.k8s.io/controller-runtime/pkg/metrics")
			}
			str := func(e ast.Expr) (string, bool) {
				switch v := e.(type) {
				case *ast.BasicLit:
					s, err := strconv.Unquote(v.Value)
					return s, err == nil
				case *ast.Ident:
					s, ok := consts[v.Name]
					return s, ok
				}
				return "", false
			}
			found, registers := 0, false
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					sel, ok := n.Type.(*ast.SelectorExpr)
					if !ok || !optsTypes[sel.Sel.Name] {
						return true
					}
					var parts [3]string
					for _, elt := range n.Elts {
						kv, ok := elt.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						key, _ := kv.Key.(*ast.Ident)
						if key == nil {
							continue
						}
						idx := map[string]int{"Namespace": 0, "Subsystem": 1, "Name": 2}
						i, ok := idx[key.Name]
						if !ok {
							continue
						}
						s, ok := str(kv.Value)
						if !ok {
							t.Errorf("%s: cannot read the metric's %s (not a string literal or a constant of this file); extend scanMetrics", fset.Position(kv.Pos()), key.Name)
						}
						parts[i] = s
					}
					var name []string
					for _, p := range parts {
						if p != "" {
							name = append(name, p)
						}
					}
					out = append(out, definedMetric{name: strings.Join(name, "_"), pos: fset.Position(n.Pos()).String()})
					found++
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					switch sel.Sel.Name {
					case "NewDesc":
						if len(n.Args) > 0 {
							s, ok := str(n.Args[0])
							if !ok {
								t.Errorf("%s: cannot read the NewDesc name; extend scanMetrics", fset.Position(n.Pos()))
							}
							out = append(out, definedMetric{name: s, pos: fset.Position(n.Pos()).String()})
							found++
						}
					case "MustRegister", "Register", "RawMustRegister", "CustomMustRegister":
						registers = true
					}
				}
				return true
			})
			if importsMetrics && registers && found == 0 {
				t.Errorf("%s registers metrics but defines none this test can read: define them with *Opts literals in the same file, or extend scanMetrics", path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							out[name.Name] = s
						}
					}
				}
			}
		}
	}
	return out
}

// TestMetricsDocumented: every metric pool-scheduler's code defines (plugins, labeler, version)
// is listed in docs/metrics.md, and every pool_scheduler_/pool_labeler_ metric the page lists
// exists in the code.
func TestMetricsDocumented(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	metrics := scanMetrics(t, root, "pkg", "cmd")
	defined := map[string]bool{}
	for _, m := range metrics {
		defined[m.name] = true
		if !strings.Contains(string(doc), "`"+m.name+"`") && !strings.Contains(string(doc), "`"+m.name+"{") {
			t.Errorf("%s: metric %s is not documented in docs/metrics.md", m.pos, m.name)
		}
	}
	for _, want := range []string{"pool_scheduler_nodepoolready_rejections_total", "pool_labeler_reconciles_total", "pool_scheduler_build_info"} {
		if !defined[want] {
			t.Errorf("the source scan did not find %s: scanMetrics is broken", want)
		}
	}
	var names []string
	for name := range defined {
		names = append(names, name)
	}
	sort.Strings(names)
	t.Logf("metrics defined in pkg/ and cmd/: %v", names)

	for _, m := range regexp.MustCompile("`((?:pool_scheduler|pool_labeler)_[a-z_]+)").FindAllStringSubmatch(string(doc), -1) {
		if !defined[m[1]] {
			t.Errorf("docs/metrics.md documents %s, which no code defines", m[1])
		}
	}
}
