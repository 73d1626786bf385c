package static

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// releaseWorkflow is what checkReleaseWorkflow reads of .github/workflows/release.yaml.
type releaseWorkflow struct {
	Permissions map[string]string      `json:"permissions"`
	Jobs        map[string]workflowJob `json:"jobs"`
}

type workflowJob struct {
	Needs       any               `json:"needs"`
	Permissions map[string]string `json:"permissions"`
	Steps       []struct {
		Uses string         `json:"uses"`
		Run  string         `json:"run"`
		With map[string]any `json:"with"`
	} `json:"steps"`
}

// needs lists the jobs a job needs (a name or a list of names).
func (j workflowJob) needs() []string {
	switch n := j.Needs.(type) {
	case string:
		return []string{n}
	case []any:
		var out []string
		for _, v := range n {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	return nil
}

// artifacts lists the names of the artifacts the job's steps upload or download (action is
// actions/upload-artifact or actions/download-artifact).
func (j workflowJob) artifacts(action string) []string {
	var out []string
	for _, st := range j.Steps {
		if strings.HasPrefix(st.Uses, action+"@") {
			out = append(out, fmt.Sprint(st.With["name"]))
		}
	}
	return out
}

var (
	pinnedUses = regexp.MustCompile(`^\s*-?\s*uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$`)
	exactGo    = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	// What builds the release (or a part of it): make release, make image, make binaries,
	// make build, go build.
	buildsRelease = regexp.MustCompile(`(?m)\bmake (release|image|binaries|build)(\s|$)|\bgo build\b`)
)

// checkReleaseWorkflow lists what the release workflow lacks of issue #34's release trust and
// issue #42's split: every action pinned to a commit (with its version as a comment), Go pinned
// to the Dockerfile's exact version, the release built in a job gated on a job running the whole
// test suite, without the OIDC token, and signed keyless in a later job that holds the token,
// builds nothing and downloads what the build uploaded; the signed release verified before the
// images are pushed, and the pushed images verified.
func checkReleaseWorkflow(data []byte, dockerfileGo string) []string {
	var problems []string
	for i, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "uses:") && !pinnedUses.MatchString(line) {
			problems = append(problems, fmt.Sprintf("line %d: action not pinned to a commit with its version (# vX.Y.Z): %s", i+1, strings.TrimSpace(line)))
		}
	}
	var wf releaseWorkflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return append(problems, err.Error())
	}
	if wf.Permissions["id-token"] != "" {
		problems = append(problems, "id-token permission at the workflow level: only the signing job may have it")
	}
	names := slices.Sorted(maps.Keys(wf.Jobs))
	scripts := map[string]string{}
	var testJobs, buildJobs []string
	for _, name := range names {
		job := wf.Jobs[name]
		var runs []string
		for _, st := range job.Steps {
			if strings.HasPrefix(st.Uses, "actions/setup-go@") {
				if v := fmt.Sprint(st.With["go-version"]); !exactGo.MatchString(v) || v != dockerfileGo {
					problems = append(problems, fmt.Sprintf("job %s: setup-go go-version %q, want the Dockerfile's exact golang:%s", name, v, dockerfileGo))
				}
			}
			runs = append(runs, st.Run)
		}
		scripts[name] = strings.Join(runs, "\n")
		if strings.Contains(scripts[name], ".ci/run") || strings.Contains(scripts[name], "make test") {
			testJobs = append(testJobs, name)
		}
		if strings.Contains(scripts[name], "make release") && buildsRelease.MatchString(scripts[name]) {
			buildJobs = append(buildJobs, name)
		}
		signs := strings.Contains(scripts[name], "make sign-release")
		if job.Permissions["id-token"] == "write" {
			if !signs {
				problems = append(problems, fmt.Sprintf("job %s: id-token: write without signing", name))
			}
			if buildsRelease.MatchString(scripts[name]) {
				problems = append(problems, fmt.Sprintf("job %s: builds the release and holds id-token: write: sign in a job of its own that downloads the built release", name))
			}
		}
	}
	if len(testJobs) == 0 {
		problems = append(problems, "no job runs make test (.ci/run)")
	}
	if len(buildJobs) != 1 {
		return append(problems, fmt.Sprintf("jobs %q run make release, want one", buildJobs))
	}
	build := buildJobs[0]
	for _, tj := range testJobs {
		if !slices.Contains(wf.Jobs[build].needs(), tj) {
			problems = append(problems, fmt.Sprintf("job %s: makes the release without needs: %s", build, tj))
		}
	}

	// The release's pipeline: the build job and the jobs after it (by needs), in order.
	depth := map[string]int{build: 0}
	for changed := true; changed; {
		changed = false
		for _, name := range names {
			for _, n := range wf.Jobs[name].needs() {
				if d, ok := depth[n]; ok && (depth[name] <= d) && name != build {
					if _, seen := depth[name]; !seen || depth[name] <= d {
						depth[name] = d + 1
						changed = true
					}
				}
			}
		}
	}
	pipeline := slices.Collect(maps.Keys(depth))
	slices.SortFunc(pipeline, func(a, b string) int {
		if depth[a] != depth[b] {
			return depth[a] - depth[b]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	var signJobs []string
	for _, name := range pipeline {
		parts = append(parts, scripts[name])
		if strings.Contains(scripts[name], "make sign-release") {
			signJobs = append(signJobs, name)
		}
	}
	script := strings.Join(parts, "\n")
	at := func(s string) int { return strings.Index(script, s) }
	if len(signJobs) == 0 {
		return append(problems, fmt.Sprintf("job %s: the release is not signed (make sign-release) after it is built", build))
	}
	uploaded := wf.Jobs[build].artifacts("actions/upload-artifact")
	for _, name := range signJobs {
		job := wf.Jobs[name]
		switch {
		case !regexp.MustCompile(`make sign-release[^\n]*KEYLESS=1`).MatchString(scripts[name]):
			problems = append(problems, fmt.Sprintf("job %s: signs with a key, not keyless (KEYLESS=1)", name))
		case job.Permissions["id-token"] != "write":
			problems = append(problems, fmt.Sprintf("job %s: signs keyless without permissions: id-token: write", name))
		}
		if name == build {
			continue // reported above, with the token, as a build job that signs
		}
		if !slices.ContainsFunc(job.artifacts("actions/download-artifact"), func(a string) bool { return slices.Contains(uploaded, a) }) {
			problems = append(problems, fmt.Sprintf("job %s: does not download the release job %s uploads (actions/download-artifact of its actions/upload-artifact %q)", name, build, uploaded))
		}
		if !slices.Contains(job.needs(), build) {
			problems = append(problems, fmt.Sprintf("job %s: signs without needs: %s", name, build))
		}
	}
	verify, push := at("make verify-release"), at("make push-image")
	switch {
	case verify < 0 || verify < at("make sign-release"):
		problems = append(problems, "the release pipeline does not verify the signed release (make verify-release after make sign-release)")
	case push < 0 || push < verify:
		problems = append(problems, "the release pipeline pushes the images before verifying the release")
	case !regexp.MustCompile(`make verify-release[^\n]*PULLED=1`).MatchString(script[push:]):
		problems = append(problems, "the release pipeline does not verify the pushed images (make verify-release ... PULLED=1 after make push-image)")
	}
	return problems
}

// TestReleaseWorkflow checks .github/workflows/release.yaml with checkReleaseWorkflow, and
// that the check catches each thing it is for (the workflow with one of them undone).
func TestReleaseWorkflow(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FROM golang:(\S+) AS build$`).FindSubmatch(dockerfile)
	if m == nil || !exactGo.Match(m[1]) {
		t.Fatalf("the Dockerfile's build stage is not FROM golang:<exact X.Y.Z> AS build")
	}
	goVersion := string(m[1])
	wf := string(data)
	replace := func(old, new string) func(t *testing.T) string {
		return func(t *testing.T) string {
			if !strings.Contains(wf, old) {
				t.Fatalf("release.yaml has no %q to change", old)
			}
			return strings.ReplaceAll(wf, old, new)
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T) string
		want   string
	}{
		{name: "as committed", change: func(*testing.T) string { return wf }},
		{name: "a floating action tag", change: replace("actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0", "actions/checkout@v4"), want: "action not pinned to a commit"},
		{name: "a floating Go version", change: replace(`go-version: "`+goVersion+`"`, `go-version: "1.26.x"`), want: "setup-go go-version \"1.26.x\""},
		{name: "release not gated on the tests", change: replace("    needs: test\n", ""), want: "makes the release without needs: test"},
		{name: "no signing", change: replace("make sign-release", "true"), want: "the release is not signed"},
		{name: "key-based signing", change: replace(`IMAGE_REPO="$IMAGE_REPO" KEYLESS=1`, `IMAGE_REPO="$IMAGE_REPO" KEY=release.key`), want: "not keyless"},
		{name: "no OIDC token", change: replace("      id-token: write", "      actions: read"), want: "without permissions: id-token: write"},
		{name: "the build job holds the OIDC token", change: replace("    permissions:\n      contents: read\n    env:\n", "    permissions:\n      contents: read\n      id-token: write\n    env:\n"), want: "job build: builds the release and holds id-token: write"},
		{name: "the signing job builds", change: replace("        run: make sign-release", `        run: make release VERSION="$VERSION" && make sign-release`), want: "job sign: builds the release and holds id-token: write"},
		{name: "the signing job signs something else", change: replace("          name: release\n          path: _output/release\n", "          name: sources\n          path: _output/release\n"), want: "job sign: does not download the release job build uploads"},
		{name: "the signing job does not wait for the build", change: replace("  sign:\n    needs: build\n", "  sign:\n    needs: test\n"), want: "job build: the release is not signed (make sign-release) after it is built"},
		{name: "no verification", change: replace("make verify-release", "true"), want: "does not verify the signed release"},
		{name: "verified only after the push", change: replace(`          make verify-release VERSION="$VERSION" IMAGE_REPO="$IMAGE_REPO" TRUSTED_ROOT=trusted_root.json IDENTITY="$IDENTITY"`+"\n", ""), want: "pushes the images before verifying the release"},
		{name: "pushed images not verified", change: replace(" PULLED=1", ""), want: "does not verify the pushed images"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := checkReleaseWorkflow([]byte(tc.change(t)), goVersion)
			if tc.want == "" {
				if diff := cmp.Diff([]string(nil), problems); diff != "" {
					t.Errorf("release.yaml (-want +got):\n%s", diff)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q, want one containing %q", problems, tc.want)
			}
		})
	}
}
