package static

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	labelerapp "github.com/pool-scheduler/pool-scheduler/cmd/pool-labeler/app"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
	"github.com/pool-scheduler/pool-scheduler/test/util"
	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// The counts and lists the docs state, each checked against what the code ships (docs once said
// three plugins while four shipped, three or five pool-labeler modes for seven, four identities
// while describing eight, that "the binary" bundles scheduler-plugins though the 1.36 line
// bundles none, and left a zone key out of DomainSpread's defaults).

// prose is one paragraph of a doc (or one block of Go comments), with where it starts.
type prose struct {
	file string
	line int
	text string // the paragraph's lines joined by spaces
}

func (p prose) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

// paragraphs splits what users read into paragraphs: the docs (docFiles) as runs of non-blank
// lines; the Go code of cmd/, pkg/ and internal/ as runs of // comment lines (package docs and
// command help say how many modes and plugins there are) and as string literals (flag help,
// command descriptions, the image's annotations), one per literal or per sum of literals; and
// the shipped YAML (manifests/, the chart's Chart.yaml, values and templates) as runs of
// non-blank lines, comments included.
func paragraphs(t *testing.T) []prose {
	t.Helper()
	root := repoRoot(t)
	var out []prose
	split := func(file string, lines []string, keep func(string) (string, bool)) {
		var cur []string
		start := 0
		flush := func() {
			if len(cur) > 0 {
				out = append(out, prose{file: file, line: start + 1, text: strings.Join(cur, " ")})
			}
			cur = nil
		}
		for i, l := range lines {
			text, ok := keep(l)
			if !ok || strings.TrimSpace(text) == "" {
				flush()
				continue
			}
			if len(cur) == 0 {
				start = i
			}
			cur = append(cur, strings.TrimSpace(text))
		}
		flush()
	}
	all := func(l string) (string, bool) { return l, true }
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		split(f, strings.Split(string(data), "\n"), all)
	}
	for _, dir := range []string{"cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			split(rel, strings.Split(string(data), "\n"), func(l string) (string, bool) {
				c, ok := strings.CutPrefix(strings.TrimSpace(l), "//")
				return c, ok && !strings.HasPrefix(c, "go:")
			})
			lits, err := stringLiterals(rel, data)
			out = append(out, lits...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "manifests"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".tpl") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		split(rel, strings.Split(string(data), "\n"), all)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stringLiterals returns the string literals of a Go file, a sum of literals ("a" + "b") as one.
func stringLiterals(file string, src []byte) ([]prose, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []prose
	ast.Inspect(f, func(n ast.Node) bool {
		text, ok := constantString(n)
		if !ok {
			return true
		}
		if strings.TrimSpace(text) != "" {
			out = append(out, prose{file: file, line: fset.Position(n.Pos()).Line, text: strings.Join(strings.Fields(text), " ")})
		}
		return false // a sum's parts are in it
	})
	return out, nil
}

// constantString is the value of a string literal or of a sum of them.
func constantString(n ast.Node) (string, bool) {
	switch e := n.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := constantString(e.X)
		if !ok {
			return "", false
		}
		y, ok := constantString(e.Y)
		return x + y, ok
	case *ast.ParenExpr:
		return constantString(e.X)
	}
	return "", false
}

var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}

// number reads "four" or "4".
func number(s string) int {
	s = strings.ToLower(s)
	for i, w := range numberWords {
		if s == w {
			return i
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// countClaim matches "<number> <noun>", the number a word or digits, with optional words in
// between (e.g. "four out-of-tree plugins").
func countClaim(between, noun string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(` + strings.Join(numberWords, "|") + `|\d+) (?:` + between + `)?` + noun + `\b`)
}

// TestDocsCountThePlugins: every "<n> plugins" in the docs is the number of plugins the
// scheduler registers (pkg/plugins.Registry): a doc that means a subset names them instead.
func TestDocsCountThePlugins(t *testing.T) {
	want := len(plugins.Registry())
	claim := countClaim(`out-of-tree |own |scheduler `, `plugins`)
	checked := 0
	for _, p := range paragraphs(t) {
		for _, m := range claim.FindAllStringSubmatch(p.text, -1) {
			checked++
			if got := number(m[1]); got != want {
				t.Errorf("%s: %q, but pkg/plugins registers %d plugins (%s)", p, m[0], want, registered())
			}
		}
	}
	if checked < 2 { // docs/architecture.md and docs/fuzzing.md say how many there are
		t.Fatalf("found %d plugin counts in the docs; the pattern no longer matches them", checked)
	}
}

// TestPluginListsNameEveryPlugin: a list of plugins that follows the word "plugins" ("node-pool
// plugins (NodePoolReady, ...)") names every plugin pkg/plugins registers: the binary's help, the
// image's description and the chart's once listed three of four. A doc about some of them names
// them without that word before the list.
func TestPluginListsNameEveryPlugin(t *testing.T) {
	want := slices.Sorted(maps.Keys(plugins.Registry()))
	list := regexp.MustCompile(`\bplugins:? \(([A-Z][A-Za-z]+(?:,? (?:and )?[A-Z][A-Za-z]+)+)\)`)
	name := regexp.MustCompile(`[A-Z][A-Za-z]+`)
	checked := map[string]bool{}
	for _, p := range paragraphs(t) {
		for _, m := range list.FindAllStringSubmatch(p.text, -1) {
			checked[p.file] = true
			got := name.FindAllString(m[1], -1)
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: %q lists other plugins than pkg/plugins registers (-registered +listed):\n%s", p, m[0], diff)
			}
		}
	}
	// The three user-facing descriptions: the binary's help, the image's annotation, the chart's.
	for _, f := range []string{"cmd/pool-scheduler/app/command.go", "internal/ociimage/image.go", "manifests/charts/pool-scheduler/Chart.yaml"} {
		if !checked[f] {
			t.Errorf("%s: no list of plugins found; the pattern no longer matches its description", f)
		}
	}
}

func registered() string {
	var names []string
	for n := range plugins.Registry() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// TestDocsCountThePoolLabelerModes: wherever a paragraph about pool-labeler says how many modes
// it has, that is the number of subcommands its command has (cmd/pool-labeler/app).
func TestDocsCountThePoolLabelerModes(t *testing.T) {
	var modes []string
	for _, c := range labelerapp.NewCommand().Commands() {
		modes = append(modes, c.Name())
	}
	claim := countClaim(`[a-z]+ `, `modes`)
	checked := 0
	for _, p := range paragraphs(t) {
		if !strings.Contains(p.text, "pool-labeler") {
			continue
		}
		for _, m := range claim.FindAllStringSubmatch(p.text, -1) {
			checked++
			if got := number(m[1]); got != len(modes) {
				t.Errorf("%s: %q, but pool-labeler has %d modes (%s)", p, m[0], len(modes), strings.Join(modes, ", "))
			}
		}
	}
	if checked < 2 { // the README's pool-labeler section and cmd/pool-labeler/app's package doc
		t.Fatalf("found %d counts of pool-labeler's modes; the pattern no longer matches the docs", checked)
	}
}

// TestDocsCountTheIdentities: docs/security.md gives every ServiceAccount pool-scheduler runs as
// its own section, exactly those the kustomize manifests and the chart (default values, hooks
// included) create, and every "<n> identities" in the docs is their number.
func TestDocsCountTheIdentities(t *testing.T) {
	root := repoRoot(t)
	accounts := map[string]bool{}
	add := func(objs []*unstructured.Unstructured) {
		for _, o := range objs {
			if o.GetKind() == "ServiceAccount" {
				accounts[o.GetName()] = true
			}
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "manifests"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "charts" {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".yaml" || d.Name() == "kustomization.yaml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := util.DecodeObjects(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		add(objs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, _, err := util.RenderChart("v1.34.10", "pool-scheduler", "pool-scheduler", "")
	if err != nil {
		t.Fatal(err)
	}
	add(objs)
	var want []string
	for a := range accounts {
		want = append(want, a)
	}
	sort.Strings(want)

	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)\n## ServiceAccounts and their rights\n(.*?)\n## ").FindSubmatch(doc)
	if section == nil {
		t.Fatal(`docs/security.md has no "## ServiceAccounts and their rights" section`)
	}
	var got []string
	for _, m := range regexp.MustCompile("(?m)^### `([a-z0-9-]+)`").FindAllSubmatch(section[1], -1) {
		got = append(got, string(m[1]))
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/security.md's ServiceAccount sections differ from the ServiceAccounts of manifests/ and the chart (-shipped +documented):\n%s", diff)
	}

	claim := countClaim("", `identities`)
	checked := 0
	for _, p := range paragraphs(t) {
		for _, m := range claim.FindAllStringSubmatch(p.text, -1) {
			checked++
			if got := number(m[1]); got != len(want) {
				t.Errorf("%s: %q, but manifests/ and the chart create %d ServiceAccounts (%s)", p, m[0], len(want), strings.Join(want, ", "))
			}
		}
	}
	if checked < 1 { // docs/security.md's first sentence
		t.Fatalf("found %d counts of identities; the pattern no longer matches docs/security.md", checked)
	}
}

// TestDocsSayWhichLinesBundleSchedulerPlugins: a paragraph saying scheduler-plugins is bundled
// or registered, with a version, names the release line that bundles that version
// ("the 1.34 line", "line 1.34"), and says of any line it names that bundles none that it has
// none. What each line bundles is pkg/version's schedulerPlugins in that line's file
// (line_k8s<major><minor>.go, built with the line's tags).
func TestDocsSayWhichLinesBundleSchedulerPlugins(t *testing.T) {
	root := repoRoot(t)
	bundled := map[string]string{} // line -> scheduler-plugins version, "" for none
	constRE := regexp.MustCompile(`(?m)^const schedulerPlugins = "([^"]*)"`)
	for _, l := range releaselines.All(t) {
		f := filepath.Join(root, "pkg", "version", "line_k8s"+strings.ReplaceAll(l.Line, ".", "")+".go")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("line %s: %v", l.Line, err)
		}
		m := constRE.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no `const schedulerPlugins = \"...\"`", f)
		}
		bundled[l.Line] = string(m[1])
	}
	names := func(line string) *regexp.Regexp {
		q := regexp.QuoteMeta(line)
		return regexp.MustCompile(`\b` + q + ` line\b|\bline ` + q + `\b|\b` + q + ` \(default\)`)
	}
	verb := regexp.MustCompile(`(?i)\b(bundl\w*|register\w*)\b`)
	version := regexp.MustCompile(`\bv0\.\d+\.\d+\b`)
	checked := 0
	for _, p := range paragraphs(t) {
		if !strings.Contains(p.text, "scheduler-plugins") || !verb.MatchString(p.text) {
			continue
		}
		for _, v := range version.FindAllString(p.text, -1) {
			var lines []string
			for l, b := range bundled {
				if b == v {
					lines = append(lines, l)
				}
			}
			if len(lines) == 0 {
				continue // another module's version in the same paragraph
			}
			checked++
			for _, l := range lines {
				if !names(l).MatchString(p.text) {
					t.Errorf("%s: says scheduler-plugins %s is bundled without naming the line that bundles it (the %s line; %s): %q", p, v, l, lineSummary(bundled), p.text)
				}
			}
		}
		for l, b := range bundled {
			if b == "" && names(l).MatchString(p.text) && !regexp.MustCompile(`(?i)\bnone\b|\bno\b`).MatchString(p.text) {
				t.Errorf("%s: names the %s line where scheduler-plugins is bundled, but it bundles none (%s): %q", p, l, lineSummary(bundled), p.text)
			}
		}
	}
	if checked < 1 { // the README's plugin section
		t.Fatalf("found %d claims that scheduler-plugins is bundled; the pattern no longer matches the docs", checked)
	}
}

func lineSummary(bundled map[string]string) string {
	var parts []string
	for l, b := range bundled {
		if b == "" {
			b = "none"
		}
		parts = append(parts, l+": "+b)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// TestDocsListTheDefaultZoneKeys: wherever the docs spell out DomainSpread's default zone
// dimension ("`zone` = ..."), they list its label keys, in order, as the defaults have them
// (configv1.DefaultSpreadDimensions): every label key written between "`zone` =" and the next
// dimension ("`update-domain`") or the end of the paragraph.
func TestDocsListTheDefaultZoneKeys(t *testing.T) {
	var want []string
	for _, d := range configv1.DefaultSpreadDimensions() {
		if d.Name == "zone" {
			want = d.LabelKeys
		}
	}
	if want == nil {
		t.Fatal("the default dimensions have no zone")
	}
	key := regexp.MustCompile("`([a-z0-9.-]+/[a-z0-9._-]+)`")
	checked := 0
	for _, p := range paragraphs(t) {
		rest := p.text
		for {
			i := strings.Index(rest, "`zone` = ")
			if i < 0 {
				break
			}
			rest = rest[i+len("`zone` = "):]
			item := rest
			if j := strings.Index(item, "`update-domain`"); j >= 0 {
				item = item[:j]
			}
			var got []string
			for _, m := range key.FindAllStringSubmatch(item, -1) {
				got = append(got, m[1])
			}
			checked++
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s lists the default zone keys as %q (-defaults +doc):\n%s", p, got, diff)
			}
		}
	}
	if checked < 2 { // DomainSpread's README and docs/azure.md
		t.Fatalf("found %d lists of the default zone keys; the pattern no longer matches the docs", checked)
	}
}
