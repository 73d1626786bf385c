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
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		Needs       any               `json:"needs"`
		Permissions map[string]string `json:"permissions"`
		Steps       []struct {
			Uses string         `json:"uses"`
			Run  string         `json:"run"`
			With map[string]any `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

var (
	pinnedUses = regexp.MustCompile(`^\s*-?\s*uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$`)
	exactGo    = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
)

// checkReleaseWorkflow lists what the release workflow lacks of issue #34's release trust: every
// action pinned to a commit (with its version as a comment), Go pinned to the Dockerfile's exact
// version, the release gated on a job running the whole test suite, signing keyless with the OIDC
// token only where it signs, the signed release verified before the images are pushed, and the
// pushed images verified.
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
	var testJobs []string
	for _, name := range slices.Sorted(maps.Keys(wf.Jobs)) {
		for _, st := range wf.Jobs[name].Steps {
			if strings.Contains(st.Run, ".ci/run") || strings.Contains(st.Run, "make test") {
				testJobs = append(testJobs, name)
				break
			}
		}
	}
	if len(testJobs) == 0 {
		problems = append(problems, "no job runs make test (.ci/run)")
	}
	var releases int
	for _, name := range slices.Sorted(maps.Keys(wf.Jobs)) {
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
		script := strings.Join(runs, "\n")
		at := func(s string) int { return strings.Index(script, s) }
		signs := at("make sign-release") >= 0
		if job.Permissions["id-token"] == "write" && !signs {
			problems = append(problems, fmt.Sprintf("job %s: id-token: write without signing", name))
		}
		if at("make release") < 0 {
			continue
		}
		releases++
		needs := fmt.Sprint(job.Needs)
		for _, tj := range testJobs {
			if !strings.Contains(needs, tj) {
				problems = append(problems, fmt.Sprintf("job %s: makes the release without needs: %s", name, tj))
			}
		}
		switch {
		case !signs:
			problems = append(problems, fmt.Sprintf("job %s: does not sign the release (make sign-release)", name))
		case !strings.Contains(script, "make sign-release") || !regexp.MustCompile(`make sign-release[^\n]*KEYLESS=1`).MatchString(script):
			problems = append(problems, fmt.Sprintf("job %s: signs with a key, not keyless (KEYLESS=1)", name))
		case job.Permissions["id-token"] != "write":
			problems = append(problems, fmt.Sprintf("job %s: signs keyless without permissions: id-token: write", name))
		}
		verify, push := at("make verify-release"), at("make push-image")
		switch {
		case verify < 0 || verify < at("make sign-release"):
			problems = append(problems, fmt.Sprintf("job %s: does not verify the signed release (make verify-release after make sign-release)", name))
		case push < 0 || push < verify:
			problems = append(problems, fmt.Sprintf("job %s: pushes the images before verifying the release", name))
		case !regexp.MustCompile(`make verify-release[^\n]*PULLED=1`).MatchString(script[push:]):
			problems = append(problems, fmt.Sprintf("job %s: does not verify the pushed images (make verify-release ... PULLED=1 after make push-image)", name))
		}
	}
	if releases == 0 {
		problems = append(problems, "no job runs make release")
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
		{name: "no signing", change: replace("make sign-release", "true"), want: "does not sign the release"},
		{name: "key-based signing", change: replace(`IMAGE_REPO="$IMAGE_REPO" KEYLESS=1`, `IMAGE_REPO="$IMAGE_REPO" KEY=release.key`), want: "not keyless"},
		{name: "no OIDC token", change: replace("      id-token: write", "      actions: read"), want: "without permissions: id-token: write"},
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
