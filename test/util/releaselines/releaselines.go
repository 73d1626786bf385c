// Package releaselines reads the release lines the repository builds (docs/compatibility.md)
// from the files the Makefile reads, for tests that check the chart, the docs and CI against
// them. It imports nothing but the standard library, so static tests can use it cheaply.
package releaselines

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"testing"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Line is one Kubernetes minor the repository builds pool-scheduler for
// (docs/compatibility.md): the default line from go.mod and hack/versions.env, the others from
// lines/k8s-<minor>/.
type Line struct {
	Line        string // "1.36"
	Minor       int    // 36
	KubeVersion string // "v1.36.3"
	Default     bool   // go.mod's line (make build, make test without LINE)
}

var kubeVersionRE = regexp.MustCompile(`^v1\.(\d+)\.\d+$`)

// All lists the lines the repository builds, oldest first.
func All(t testing.TB) []Line {
	t.Helper()
	root := RepoRoot()
	files := []string{filepath.Join(root, "hack", "versions.env")}
	more, err := filepath.Glob(filepath.Join(root, "lines", "k8s-*", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	var out []Line
	for i, f := range files {
		v, err := EnvValue(f, "KUBE_VERSION")
		if err != nil {
			t.Fatal(err)
		}
		m := kubeVersionRE.FindStringSubmatch(v)
		if m == nil {
			t.Fatalf("%s: KUBE_VERSION %q is not v1.MINOR.PATCH", f, v)
		}
		minor, _ := strconv.Atoi(m[1])
		l := Line{Line: "1." + m[1], Minor: minor, KubeVersion: v, Default: i == 0}
		if !l.Default {
			if want := "k8s-" + l.Line; filepath.Base(filepath.Dir(f)) != want {
				t.Fatalf("%s: KUBE_VERSION %s belongs in lines/%s", f, v, want)
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Minor < out[j].Minor })
	for i := 1; i < len(out); i++ {
		if out[i].Minor == out[i-1].Minor {
			t.Fatalf("two release lines of Kubernetes %s", out[i].Line)
		}
	}
	return out
}

// EnvValue reads KEY=value from a versions.env file (hack/versions.env, lines/*/versions.env).
func EnvValue(file, key string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(key) + `=(\S+)\s*$`)
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := re.FindStringSubmatch(s.Text()); m != nil {
			return m[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no %s=", file, key)
}
