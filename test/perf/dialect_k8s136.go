//go:build k8s136

package perf

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// templateFuncs maps scheduler_perf's v1.34 template functions to their v1.36 names
// (getTemplateFuncs in k8s.io/kubernetes v1.36.3 test/integration/scheduler_perf/operations.go:
// "DivideInt", "Mod"; v1.34.10's create.go defines "div" and "mod").
var templateFuncs = strings.NewReplacer("(div ", "(DivideInt ", "{{div ", "{{DivideInt ", "(mod ", "(Mod ", "{{mod ", "{{Mod ")

var templatePath = regexp.MustCompile(`((?:nodeTemplatePath|defaultPodTemplatePath|podTemplatePath): )templates/`)

// suiteConfig returns the scheduler_perf configuration to run on this line: a copy of the suite's
// with its templates rewritten to v1.36's function names, in a directory of the test's. Paths
// other than the templates' (profiles, the shipped configuration) stay relative to test/perf.
func suiteConfig(tb testing.TB, dir string) string {
	tb.Helper()
	tmp := filepath.Join(dir, "templates")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		tb.Fatal(err)
	}
	entries, err := os.ReadDir("templates")
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("templates", e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), []byte(templateFuncs.Replace(string(data))), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	config, err := os.ReadFile("config/performance-config.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, "performance-config.yaml")
	if err := os.WriteFile(out, templatePath.ReplaceAll(config, []byte("${1}"+tmp+"/")), 0o644); err != nil {
		tb.Fatal(err)
	}
	return out
}
