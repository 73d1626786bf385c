package ociimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// tinyBinaries builds a small static Go program as both of the image's binaries for the host
// architecture, in a fresh directory.
func tinyBinaries(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/tiny\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { println(\"tiny\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(out, "tiny"), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a test binary: %v\n%s", err, b)
	}
	data, err := os.ReadFile(filepath.Join(out, "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Binaries {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func options(dir string, created time.Time) Options {
	return Options{
		Version: "v1.2.3", Revision: strings.Repeat("ab", 20), Source: DefaultSource, Created: created,
		Platforms: map[string]string{"linux/" + runtime.GOARCH: dir},
	}
}

func digests(t *testing.T, r *Result) []v1.Hash {
	t.Helper()
	d, err := r.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{d}
	for _, s := range r.SBOMs {
		sd, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sd)
	}
	return out
}

// TestBuildIsReproducible: the same binaries and build time give the same index and SBOM
// digests (what lets a release pin its chart to the digest before pushing); another build time
// gives another digest, so the time really is stamped in.
func TestBuildIsReproducible(t *testing.T) {
	dir := tinyBinaries(t)
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var got [][]v1.Hash
	for _, created := range []time.Time{at, at, at.Add(time.Second)} {
		r, err := Build(options(dir, created))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, digests(t, r))
	}
	for i := range got[0] {
		if got[0][i] != got[1][i] {
			t.Errorf("two builds of the same input: digest %d is %s, then %s", i, got[0][i], got[1][i])
		}
		if got[0][i] == got[2][i] {
			t.Errorf("builds at different times share digest %d (%s)", i, got[0][i])
		}
	}
}

// TestBuildRefusesBadInput: each mistake gets an error naming what is wrong.
func TestBuildRefusesBadInput(t *testing.T) {
	dir := tinyBinaries(t)
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	empty := t.TempDir()
	at := time.Unix(0, 0)
	for _, tt := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no version", func(o *Options) { o.Version = "" }, "version, revision and source are required"},
		{"no platform", func(o *Options) { o.Platforms = nil }, "no platform"},
		{"bad platform", func(o *Options) { o.Platforms = map[string]string{"linux": dir} }, `platform "linux": want os/arch`},
		{"wrong architecture", func(o *Options) { o.Platforms = map[string]string{"linux/" + other: dir} }, "not " + other},
		{"missing binary", func(o *Options) { o.Platforms = map[string]string{"linux/" + runtime.GOARCH: empty} }, "binary pool-scheduler"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := options(dir, at)
			tt.edit(&o)
			_, err := Build(o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestSBOMListsBuildInfo: the SBOM names every module a binary's build info lists, at the
// version linked (a replace directive's target), and the Go standard library, with valid and
// unique SPDX IDs, and a module two binaries share once. (test/image checks real binaries.)
func TestSBOMListsBuildInfo(t *testing.T) {
	info := func(deps ...*debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Path: "example.com/cmd/x", Main: debug.Module{Path: "example.com"}, Deps: deps,
			Settings: []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "0"}}}
	}
	api := &debug.Module{Path: "k8s.io/api", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.34.10", Sum: "h1:x="}}
	toml := &debug.Module{Path: "github.com/BurntSushi/toml", Version: "v1.5.0", Sum: "h1:y="}
	o := SBOMOptions{Version: "v1.2.3", Revision: "abc", Source: DefaultSource}
	doc := &SPDXDocument{}
	modules := map[string]SPDXPackage{}
	addBinary(doc, modules, o, "one", []byte{1}, info(api, toml))
	addBinary(doc, modules, o, "two", []byte{2}, info(api))
	for _, p := range modules {
		doc.Packages = append(doc.Packages, p)
	}
	packages := map[string]SPDXPackage{}
	for _, p := range doc.Packages {
		if _, dup := packages[p.SPDXID]; dup {
			t.Errorf("duplicate SPDXID %s", p.SPDXID)
		}
		packages[p.SPDXID] = p
		if !validID.MatchString(p.SPDXID) {
			t.Errorf("invalid SPDXID %q", p.SPDXID)
		}
	}
	got := map[string][]string{}
	for _, r := range doc.Relationships {
		p, ok := packages[r.RelatedSPDXElement]
		if !ok {
			t.Errorf("relationship to unknown element %s", r.RelatedSPDXElement)
		}
		got[r.SPDXElementID+" "+r.RelationshipType] = append(got[r.SPDXElementID+" "+r.RelationshipType], p.ExternalRefs[0].ReferenceLocator)
	}
	want := map[string][]string{
		"SPDXRef-DOCUMENT DESCRIBES":    {"pkg:golang/example.com@v1.2.3", "pkg:golang/example.com@v1.2.3"},
		"SPDXRef-Binary-one DEPENDS_ON": {"pkg:golang/stdlib@1.26.8", "pkg:golang/k8s.io/api@v0.34.10", "pkg:golang/github.com/BurntSushi/toml@v1.5.0"},
		"SPDXRef-Binary-two DEPENDS_ON": {"pkg:golang/stdlib@1.26.8", "pkg:golang/k8s.io/api@v0.34.10"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("relationships (-want +got):\n%s", diff)
	}
	if p := packages["SPDXRef-Module-github.com-BurntSushi-toml-v1.5.0"]; p.DownloadLocation != "https://proxy.golang.org/github.com/!burnt!sushi/toml/@v/v1.5.0.zip" {
		t.Errorf("download location %q", p.DownloadLocation)
	}
	if p := packages["SPDXRef-Module-k8s.io-api-v0.34.10"]; !strings.Contains(p.Comment, "replaced by k8s.io/api v0.34.10") || !strings.Contains(p.Comment, "h1:x=") {
		t.Errorf("replaced module comment %q", p.Comment)
	}
}

func TestEscapeModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/BurntSushi/toml": "github.com/!burnt!sushi/toml",
		"k8s.io/api":                 "k8s.io/api",
	} {
		if got := escapeModulePath(in); got != want {
			t.Errorf("escapeModulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
