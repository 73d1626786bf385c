package static

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

// docFiles are the prose a user reads: the README, docs/, the chart's and the plugins' READMEs.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	files := []string{"README.md", "CONTRIBUTING.md", "manifests/charts/pool-scheduler/README.md"}
	for _, glob := range []string{"docs/*.md", "pkg/plugins/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, rel)
		}
	}
	return files
}

// chartDefault is how docs state a chart value's default: "`key` (value)" or "`key`, default value".
var chartDefault = regexp.MustCompile("`([a-zA-Z][a-zA-Z0-9]*(?:\\.[a-zA-Z][a-zA-Z0-9]*)+)`(?: \\(`?([^()`]+?)`?\\)|, default `?([^,;)` ]+)`?)")

// TestDocsStateTheChartDefaults: wherever the docs give a chart value with its default, the
// default is values.yaml's (the chart README once said the domain labeler was off by default
// while values turned it on).
func TestDocsStateTheChartDefaults(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "manifests/charts/pool-scheduler/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range docFiles(t) {
		doc, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range chartDefault.FindAllStringSubmatch(string(doc), -1) {
			key, stated := m[1], m[2]+m[3]
			v, ok := lookup(values, key)
			if !ok {
				continue // not a chart value (a flag, a field of another object)
			}
			switch v.(type) {
			case map[string]any, []any:
				continue
			}
			checked++
			if got := fmt.Sprint(v); got != stated {
				t.Errorf("%s: `%s` (%s), but values.yaml's default is %q", f, key, stated, got)
			}
		}
	}
	// The chart README states a dozen defaults this way; finding none means the pattern broke.
	if checked < 5 {
		t.Fatalf("found %d stated chart defaults; the pattern no longer matches the docs", checked)
	}
}

func lookup(values map[string]any, key string) (any, bool) {
	var v any = values
	for _, k := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestDocsNameTheDefaultDimensions: where the docs list DomainSpread's default dimensions (the
// metric's label values, the args' defaults), they list the names the defaults give (metrics.md
// once named a `fault-domain` dimension after it had become `zone`).
func TestDocsNameTheDefaultDimensions(t *testing.T) {
	var want []string
	for _, d := range configv1.DefaultSpreadDimensions() {
		want = append(want, d.Name)
	}
	// "(`zone`, `update-domain`, `host` by default)" and "`zone` = [...]; `update-domain` = [...]".
	listed := regexp.MustCompile("\\(((?:`[a-z-]+`, )+`[a-z-]+`) by default\\)")
	assigned := regexp.MustCompile("`([a-z-]+)` = \\[")
	root := repoRoot(t)
	checked := 0
	for _, f := range docFiles(t) {
		doc, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(doc), "\n") {
			if !strings.Contains(line, "dimension") {
				continue
			}
			var got []string
			if m := listed.FindStringSubmatch(line); m != nil {
				for _, n := range strings.Split(m[1], ", ") {
					got = append(got, strings.Trim(n, "`"))
				}
			} else if ms := assigned.FindAllStringSubmatch(line, -1); len(ms) > 0 {
				for _, m := range ms {
					got = append(got, m[1])
				}
			} else {
				continue
			}
			checked++
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s lists the default dimensions as %q (-defaults +doc):\n%s", f, got, diff)
			}
		}
	}
	if checked < 2 { // docs/metrics.md and DomainSpread's README
		t.Fatalf("found %d lists of the default dimensions; the pattern no longer matches the docs", checked)
	}
}

// TestReadmeFirstScreen: a newcomer's first screen says what pool-scheduler is, the two
// commands, what they need and how long they take, and "What it solves" follows within 40 lines.
func TestReadmeFirstScreen(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	end := -1
	for i, l := range lines {
		if l == "## What it solves" {
			end = i
			break
		}
	}
	if end < 0 || end >= 40 {
		t.Fatalf("\"## What it solves\" is at line %d, want it within the first 40", end+1)
	}
	screen := strings.Join(lines[:end], "\n")
	for _, want := range []string{"make demo", "make test", "Go 1.", "gcc", "Chromium", " min"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the README's first screen does not mention %q", want)
		}
	}
}
