package static

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// TestCompatibilityMatrix: the support matrix in the README and in docs/compatibility.md lists
// exactly the release lines the repository builds (hack/versions.env, lines/k8s-*/), each with
// its Kubernetes release, the clusters the skew policy lets it serve (its minor and the next),
// whether it bundles scheduler-plugins, and what make test runs for it; and make test does run
// every line: `make lines` names them all, and the test target runs line-all for each of the
// others (line-deep: its integration suite and fuzz smoke; line-test: its line-dependent unit
// tests and e2e suite).
func TestCompatibilityMatrix(t *testing.T) {
	lines := releaselines.All(t)
	root := releaselines.RepoRoot()
	pluginsVersion, err := releaselines.EnvValue(filepath.Join(root, "hack", "versions.env"), "SCHEDULER_PLUGINS_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	var names []string
	for _, l := range lines {
		name, plugins, tested := l.Line, "none", "`make line-all LINE="+l.Line+"`"
		if l.Default {
			// Only the default line builds scheduler-plugins (its releases are built against the
			// 1.34 framework API); TestSchedulerPluginsMatchTheLine checks the binaries' side.
			name, plugins, tested = l.Line+" (default)", pluginsVersion+", bundled", "the whole suite"
		}
		names = append(names, l.Line)
		want = append(want, []string{name, "k8s.io/kubernetes " + l.KubeVersion, fmt.Sprintf("1.%d, 1.%d", l.Minor, l.Minor+1), plugins, tested})
	}
	for _, doc := range []string{"README.md", filepath.Join("docs", "compatibility.md")} {
		rows, err := matrixRows(filepath.Join(root, doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		// The last column must start with what make test runs; the rest of it explains.
		for i, r := range rows {
			if i < len(want) && len(r) == len(want[i]) && strings.HasPrefix(r[4], want[i][4]) {
				r[4] = want[i][4]
			}
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("%s: the support matrix differs from the lines the repository builds and tests (-want +got):\n%s", doc, diff)
		}
	}

	out, err := exec.Command("make", "-s", "-C", root, "lines").Output()
	if err != nil {
		t.Fatalf("make lines: %v", err)
	}
	if got := strings.Fields(string(out)); !cmp.Equal(sortedCopy(got), sortedCopy(names)) || got[0] != lines[defaultIndex(lines)].Line {
		t.Errorf("make lines prints %q, want the default line first, then the others of %q", got, names)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	// make test's orchestration is hack/make-test.sh, given every other line by the Makefile.
	script, err := os.ReadFile(filepath.Join(root, "hack", "make-test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^"\$MAKE" --no-print-directory unit alerts fuzz-smoke etcd$`,
		`(?m)^for l in \$\{other_lines\[@\]\+"\$\{other_lines\[@\]\}"\}; do\n(.*\n)*?\s+"\$MAKE" --no-print-directory line-all LINE="\$l" .*&$`,
		`(?m)^"\$MAKE" --no-print-directory integration e2e image-test readme-test signing-test perf-smoke 2>&1 \|$`,
	} {
		if !regexp.MustCompile(re).Match(script) {
			t.Errorf("hack/make-test.sh: no match for %s: make test must test every release line (binary e2e, integration and fuzz smoke included)", re)
		}
	}
	for _, re := range []string{
		`(?m)^test:.*\n\tMAKE="\$\(MAKE\)" OTHER_LINES="\$\(OTHER_LINES\)" hack/make-test\.sh$`,
		`(?m)^OTHER_LINES := .*\$\(wildcard \$\(CURDIR\)/lines/k8s-\*/versions\.env\)`,
		`(?m)^line-all:(.*\n\t.*)*\$\(MAKE\) --no-print-directory line-deep LINE=\$\(LINE\)`,
		`(?m)^line-all:(.*\n\t.*)*\$\(MAKE\) --no-print-directory line-test LINE=\$\(LINE\)`,
		`(?m)^line-test:(.*\n\t.*)*\$\(MAKE\) --no-print-directory e2e LINE=\$\(LINE\)`,
		`(?m)^line-deep:(.*\n\t.*)*\$\(MAKE\) --no-print-directory integration LINE=\$\(LINE\)`,
		`(?m)^line-deep:(.*\n\t.*)*\$\(MAKE\) --no-print-directory fuzz-smoke LINE=\$\(LINE\)`,
	} {
		if !regexp.MustCompile(re).Match(makefile) {
			t.Errorf("Makefile: no match for %s: make test must test every release line (binary e2e, integration and fuzz smoke included)", re)
		}
	}
}

// matrixRows returns the rows of the first Markdown table whose header starts with "| line |".
func matrixRows(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows [][]string
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case !in && strings.HasPrefix(line, "| line | Kubernetes libraries |"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, cells)
		case in:
			return rows, nil
		}
	}
	if !in {
		return nil, fmt.Errorf("no support matrix (a table whose header starts with \"| line | Kubernetes libraries |\")")
	}
	return rows, s.Err()
}

func defaultIndex(lines []releaselines.Line) int {
	for i, l := range lines {
		if l.Default {
			return i
		}
	}
	return 0
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
