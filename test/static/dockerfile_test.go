// Package static checks shipped files that no test runs: the Dockerfile (no Docker engine here)
// and the metrics documentation.
package static

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerui"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// offlineResolver answers BuildKit's base-image lookups without a registry: an empty linux image
// config. Only the rules that inspect a base image's own ENV or platform lose information.
// BuildKit resolves the stages' base images in parallel (errgroup), hence the lock.
type offlineResolver struct {
	mu       sync.Mutex
	resolved []string
}

func (r *offlineResolver) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	r.mu.Lock()
	r.resolved = append(r.resolved, ref)
	r.mu.Unlock()
	p := ocispecs.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if opt.Platform != nil {
		p = *opt.Platform
	}
	img := ocispecs.Image{Platform: p, Config: ocispecs.ImageConfig{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}}
	dt, err := json.Marshal(img)
	if err != nil {
		return "", "", nil, err
	}
	return ref, digest.FromBytes(dt), dt, nil
}

// lintDockerfile runs BuildKit's Dockerfile linter, the checks `docker build --check` runs (every
// stage, default rule set), and returns its findings as "line: rule: detail" lines.
func lintDockerfile(t *testing.T, dt []byte) []string {
	t.Helper()
	resolver := &offlineResolver{}
	sourceMap := llb.NewSourceMap(nil, "Dockerfile", "Dockerfile", dt)
	sourceMap.Definition = &llb.Definition{}
	results, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		Config:       dockerui.Config{BuildArgs: map[string]string{}},
		SourceMap:    sourceMap,
		MetaResolver: resolver,
	})
	if err != nil {
		t.Fatalf("linting: %v", err)
	}
	var findings []string
	if results.Error != nil {
		findings = append(findings, "does not build: "+results.Error.Message)
	}
	for _, w := range results.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		findings = append(findings, fmt.Sprintf("Dockerfile:%d: %s: %s (%s)", line, w.RuleName, w.Detail, w.URL))
	}
	if results.Error == nil && len(resolver.resolved) == 0 {
		t.Fatalf("the linter resolved no base image: it stopped before the rules that need the stages")
	}
	return findings
}

// TestDockerfileLint fails on any finding of BuildKit's linter for the repository's Dockerfile.
func TestDockerfileLint(t *testing.T) {
	path := filepath.Join(repoRoot(t), "Dockerfile")
	dt, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range lintDockerfile(t, dt) {
		t.Error(f)
	}
}

// TestDockerfileLinterFindsProblems shows the linter runs its rules here: a Dockerfile with known
// problems gets the warnings `docker build --check` prints for it.
func TestDockerfileLinterFindsProblems(t *testing.T) {
	bad := []byte("FROM golang:1.26 as build\nMAINTAINER someone\nWORKDIR src\nENV A 1\nENV B=${UNDEFINED}\nfrom scratch\nCMD /bin/app\n")
	var rules []string
	for _, f := range lintDockerfile(t, bad) {
		rules = append(rules, strings.SplitN(f, ": ", 3)[1])
	}
	sort.Strings(rules)
	want := []string{"ConsistentInstructionCasing", "FromAsCasing", "JSONArgsRecommended", "LegacyKeyValueFormat", "MaintainerDeprecated", "UndefinedVar", "WorkdirRelativePath"}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("linter rules reported for a known-bad Dockerfile (-want +got):\n%s", diff)
	}
}

// TestDockerfileMatchesRepository checks what the linter cannot: the files the Dockerfile copies
// exist and are not excluded by .dockerignore, the build runs the Makefile's target (so the image
// gets the release build flags) for the release line of the LINE build arg, that target builds
// every binary the image copies, the Makefile's docker-image target passes every build arg the
// Dockerfile declares, and the Go image is new enough for every line's go.mod.
func TestDockerfileMatchesRepository(t *testing.T) {
	root := repoRoot(t)
	dt, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatalf("parsing Dockerfile: %v", err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("parsing Dockerfile instructions: %v", err)
	}
	ignore := dockerignore(t, root)
	makefile := readFile(t, filepath.Join(root, "Makefile"))
	declaredArgs := map[string]bool{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			declaredArgs[kv.Key] = true
		}
	}

	var buildTarget, buildWorkdir, buildRun string
	var sawDownload, copiesLines bool
	stageByName := map[string]instructions.Stage{}
	for _, st := range stages {
		stageByName[st.Name] = st
		workdir := "/"
		for _, cmd := range st.Commands {
			switch c := cmd.(type) {
			case *instructions.WorkdirCommand:
				workdir = c.Path
			case *instructions.ArgCommand:
				for _, kv := range c.Args {
					declaredArgs[kv.Key] = true
				}
			case *instructions.CopyCommand:
				if c.From != "" {
					continue // checked below against the stage it copies from
				}
				for _, src := range c.SourcePaths {
					checkContextSource(t, root, ignore, src)
					if path.Clean(src) == "lines" && buildTarget == "" && !sawDownload {
						copiesLines = true
					}
				}
			case *instructions.AddCommand:
				t.Errorf("Dockerfile:%d: use COPY, not ADD", c.Location()[0].Start.Line)
			case *instructions.RunCommand:
				line := strings.Join(c.CmdLine, " ")
				if m := regexp.MustCompile(`\bmake\s+([a-z-]+)`).FindStringSubmatch(line); m != nil {
					buildTarget, buildWorkdir, buildRun = m[1], workdir, line
				} else if strings.Contains(line, "go mod download") {
					sawDownload = true
				} else if strings.Contains(line, "go build") {
					t.Errorf("Dockerfile:%d: builds with its own `go build` (%q); run a Makefile target so the image gets the release build flags", c.Location()[0].Start.Line, line)
				}
			}
		}
	}
	if buildTarget == "" {
		t.Fatalf("no stage runs `make <target>`: the image would not be built with the Makefile's flags")
	}
	recipe := makeRecipe(t, makefile, buildTarget)
	if !strings.Contains(recipe, "CGO_ENABLED=0") || !strings.Contains(recipe, "$(LDFLAGS)") || !strings.Contains(recipe, "-trimpath") {
		t.Errorf("make %s does not build static, trimmed, stamped binaries (CGO_ENABLED=0, -trimpath, $(LDFLAGS)), which the distroless static image needs; recipe:\n%s", buildTarget, recipe)
	}

	// Every COPY --from=<build stage> must copy a binary the make target builds.
	for _, st := range stages {
		for _, cmd := range st.Commands {
			c, ok := cmd.(*instructions.CopyCommand)
			if !ok || c.From == "" {
				continue
			}
			if _, ok := stageByName[c.From]; !ok {
				t.Errorf("Dockerfile:%d: COPY --from=%s names no stage", c.Location()[0].Start.Line, c.From)
				continue
			}
			for _, src := range c.SourcePaths {
				rel, err := filepath.Rel(buildWorkdir, src)
				if err != nil || !strings.HasPrefix(rel, "bin/") {
					t.Errorf("Dockerfile:%d: copies %s, which is not under %s/bin where make %s writes", c.Location()[0].Start.Line, src, buildWorkdir, buildTarget)
					continue
				}
				name := strings.TrimPrefix(rel, "bin/")
				if !strings.Contains(recipe, "./cmd/"+name) {
					t.Errorf("Dockerfile:%d: copies bin/%s, but make %s does not build ./cmd/%s; recipe:\n%s", c.Location()[0].Start.Line, name, buildTarget, name, recipe)
				}
				if _, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil {
					t.Errorf("Dockerfile:%d: copies bin/%s, but cmd/%s does not exist", c.Location()[0].Start.Line, name, name)
				}
			}
		}
	}

	// make docker-image passes the build args the Dockerfile declares.
	imageRecipe := makeRecipe(t, makefile, "docker-image")
	passed := map[string]bool{}
	for _, m := range regexp.MustCompile(`--build-arg\s+([A-Z_]+)=`).FindAllStringSubmatch(imageRecipe, -1) {
		passed[m[1]] = true
	}
	for arg := range declaredArgs {
		if !passed[arg] {
			t.Errorf("Dockerfile declares ARG %s but `make docker-image` does not pass --build-arg %s=...; recipe:\n%s", arg, arg, imageRecipe)
		}
	}
	for arg := range passed {
		if !declaredArgs[arg] {
			t.Errorf("`make docker-image` passes --build-arg %s, which the Dockerfile does not declare", arg)
		}
	}

	// The build makes the release line the LINE build arg names (docs/compatibility.md), as
	// make binaries LINE=... does: it passes LINE to make and has lines/ in the context.
	if !declaredArgs["LINE"] || !regexp.MustCompile(`\bmake\s+`+buildTarget+`\b.*\bLINE=\$\{?LINE\b`).MatchString(buildRun) {
		t.Errorf("the build does not pass the LINE build arg to make %s (RUN %s): docker-image could not build another release line", buildTarget, buildRun)
	}
	if !copiesLines {
		t.Errorf("the build stage does not COPY lines/ before it downloads modules: LINE=<minor> needs lines/k8s-<minor>/go.mod")
	}

	// The Go image is at least the go version of every line's go.mod.
	goMods, err := filepath.Glob(filepath.Join(root, "lines", "k8s-*", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{filepath.Join(root, "go.mod")}, goMods...) {
		want := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(readFile(t, f))
		rel, _ := filepath.Rel(root, f)
		for _, st := range stages {
			m := regexp.MustCompile(`^(?:docker\.io/)?(?:library/)?golang:(\d+)\.(\d+)`).FindStringSubmatch(st.BaseName)
			if m == nil || want == nil {
				continue
			}
			if atoi(m[1])*1000+atoi(m[2]) < atoi(want[1])*1000+atoi(want[2]) {
				t.Errorf("stage %s uses %s, older than %s's go %s.%s", st.Name, st.BaseName, rel, want[1], want[2])
			}
		}
	}
}

// TestDockerfileMatchesOCIImage keeps the two definitions of the image in step: the Dockerfile's
// final stage (for Docker users) and internal/ociimage (make image, make release) must give a
// nonroot static image with the same user, entrypoint, binaries and OCI labels.
func TestDockerfileMatchesOCIImage(t *testing.T) {
	dt := readFile(t, filepath.Join(repoRoot(t), "Dockerfile"))
	res, err := parser.Parse(strings.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") || !strings.HasSuffix(final.BaseName, ":nonroot") {
		t.Errorf("final stage FROM %s; the OCI image is static and nonroot (distroless static, nonroot)", final.BaseName)
	}
	var user string
	var entrypoint, copied []string
	labels := map[string]string{}
	for _, cmd := range final.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				t.Errorf("ENTRYPOINT in shell form needs a shell; the image has none")
			}
			entrypoint = c.CmdLine
		case *instructions.LabelCommand:
			for _, kv := range c.Labels {
				labels[kv.Key] = strings.Trim(kv.Value, `"`) // quotes are removed when the build expands it
			}
		case *instructions.CopyCommand:
			if path.Clean(c.DestPath) != ociimage.BinDir {
				t.Errorf("COPY to %s; the OCI image installs binaries in %s", c.DestPath, ociimage.BinDir)
			}
			for _, src := range c.SourcePaths {
				copied = append(copied, path.Base(src))
			}
		}
	}
	if user != ociimage.User {
		t.Errorf("USER %q, the OCI image runs as %q", user, ociimage.User)
	}
	if diff := cmp.Diff([]string{ociimage.Entrypoint}, entrypoint); diff != "" {
		t.Errorf("ENTRYPOINT differs from the OCI image's (-oci +Dockerfile):\n%s", diff)
	}
	if diff := cmp.Diff(ociimage.Binaries, copied); diff != "" {
		t.Errorf("binaries copied differ from the OCI image's (-oci +Dockerfile):\n%s", diff)
	}
	want := map[string]string{
		ociimage.AnnotationTitle:    "pool-scheduler",
		ociimage.AnnotationVersion:  "${VERSION}",
		ociimage.AnnotationRevision: "${REVISION}",
		ociimage.AnnotationSource:   ociimage.DefaultSource,
	}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("LABELs differ from the OCI image's (-want +Dockerfile):\n%s", diff)
	}
}

func checkContextSource(t *testing.T, root string, ignore *patternmatcher.PatternMatcher, src string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(src)))
	if err != nil || len(matches) == 0 {
		t.Errorf("Dockerfile copies %s, which does not exist in the build context", src)
		return
	}
	for _, m := range matches {
		rel, _ := filepath.Rel(root, m)
		if rel == "." {
			continue
		}
		if ignored, _ := ignore.MatchesOrParentMatches(filepath.ToSlash(rel)); ignored {
			t.Errorf("Dockerfile copies %s, which .dockerignore excludes from the build context", rel)
		}
	}
}

func dockerignore(t *testing.T, root string) *patternmatcher.PatternMatcher {
	t.Helper()
	var patterns []string
	if f, err := os.Open(filepath.Join(root, ".dockerignore")); err == nil {
		defer f.Close()
		if patterns, err = ignorefile.ReadAll(f); err != nil {
			t.Fatalf(".dockerignore: %v", err)
		}
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	return pm
}

// makeRecipe returns the recipe lines of a Makefile target.
func makeRecipe(t *testing.T, makefile, target string) string {
	t.Helper()
	var b strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(makefile))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, target+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			b.WriteString(line + "\n")
		case in:
			in = false // the recipe ends at the first line without a tab
		}
	}
	if b.Len() == 0 {
		t.Fatalf("Makefile has no recipe for target %q", target)
	}
	return b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	dt, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(dt)
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}
