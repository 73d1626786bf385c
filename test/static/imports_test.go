package static

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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
