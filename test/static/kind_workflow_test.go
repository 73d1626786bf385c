package static

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// kindWorkflow is what checkKindWorkflow reads of .github/workflows/kind.yaml.
type kindWorkflow struct {
	// On is the triggers; sigs.k8s.io/yaml reads the YAML 1.1 key `on` as true.
	On          map[string]any    `json:"on"`
	OnAsTrue    map[string]any    `json:"true"`
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		Permissions map[string]string `json:"permissions"`
		Env         map[string]string `json:"env"`
		Strategy    struct {
			Matrix struct {
				Include []map[string]string `json:"include"`
			} `json:"matrix"`
		} `json:"strategy"`
		Steps []struct {
			Uses string         `json:"uses"`
			Run  string         `json:"run"`
			If   string         `json:"if"`
			With map[string]any `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

// kindFacts is what the kind job must agree with: the repository's release lines, the
// Dockerfile's Go, the action pins of the release workflow, the smoke script.
type kindFacts struct {
	lines        []releaselines.Line
	dockerfileGo string
	releasePins  map[string]string // action -> "<commit> # vX.Y.Z", from release.yaml
	script       string            // hack/kind-smoke.sh
	scriptMode   os.FileMode
}

const kindScript = "hack/kind-smoke.sh"

var (
	kindNodeImage = regexp.MustCompile(`^kindest/node:v1\.(\d+)\.\d+@sha256:[0-9a-f]{64}$`)
	usesRef       = regexp.MustCompile(`uses: ([\w.-]+/[\w./-]+)@(.*)$`)
	scriptStage   = regexp.MustCompile(`^hack/kind-smoke\.sh (\w+)$`)
	// The kind smoke's stages, in the order the job must run them.
	kindStages = []string{"tools", "cluster", "install", "scenario"}
)

// actionPins maps each action a workflow uses to its ref ("<commit> # vX.Y.Z").
func actionPins(data []byte) map[string]string {
	pins := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := usesRef.FindStringSubmatch(line); m != nil {
			pins[m[1]] = m[2]
		}
	}
	return pins
}

// shellFunc returns the body of the shell function name in script ("" if there is none).
func shellFunc(script, name string) string {
	_, body, ok := strings.Cut(script, "\n"+name+"() {\n")
	if !ok {
		return ""
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	return body
}

// checkKindWorkflow lists what the kind workflow lacks of issue #56's kind job: on pull requests
// and by hand, read-only and without secrets (it runs a pull request's code), every action
// pinned as the release workflow pins it and Go to the Dockerfile's version; one job per release
// line on a kind node image (by digest) of a Kubernetes minor the line serves; the smoke
// script's stages run in order (tools, cluster, install, scenario) with diagnostics on failure.
// And of the script: executable, strict, building the line's image for one platform from the
// commit, pushing it, installing the chart built from the commit from an OCI registry with the
// pushed digest, and a scenario that opts a namespace in, checks pool-scheduler places its pods,
// and holds a pod on a node whose pool labels are late with NodePoolReady's own reason.
func checkKindWorkflow(data []byte, f kindFacts) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "uses:") {
			continue
		}
		if !pinnedUses.MatchString(line) {
			add("line %d: action not pinned to a commit with its version (# vX.Y.Z): %s", i+1, strings.TrimSpace(line))
			continue
		}
		m := usesRef.FindStringSubmatch(line)
		if want, ok := f.releasePins[m[1]]; ok && m[2] != want {
			add("line %d: %s@%s, the release workflow pins %s@%s: pin both alike", i+1, m[1], m[2], m[1], want)
		}
	}
	if strings.Contains(string(data), "secrets.") {
		add("the kind job reads secrets: it runs a pull request's code and needs none")
	}
	var wf kindWorkflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		return append(problems, err.Error())
	}
	on := wf.On
	if on == nil {
		on = wf.OnAsTrue
	}
	for _, trigger := range []string{"pull_request", "workflow_dispatch"} {
		if _, ok := on[trigger]; !ok {
			add("not triggered on %s", trigger)
		}
	}
	if diff := cmp.Diff(map[string]string{"contents": "read"}, wf.Permissions); diff != "" {
		add("workflow permissions are not contents: read alone (-want +got):\n%s", diff)
	}
	if len(wf.Jobs) != 1 {
		return append(problems, fmt.Sprintf("%d jobs, want one (the smoke, a matrix over the release lines)", len(wf.Jobs)))
	}
	for name, job := range wf.Jobs {
		if job.Permissions != nil {
			add("job %s: permissions of its own %v: the workflow's contents: read is all it needs", name, job.Permissions)
		}
		// One entry per release line, on a node of a minor it serves (its own or the next).
		covered := map[string]bool{}
		var nodes []string
		for _, e := range job.Strategy.Matrix.Include {
			line, node := e["line"], e["node"]
			nodes = append(nodes, node)
			i := slices.IndexFunc(f.lines, func(l releaselines.Line) bool { return l.Line == line })
			if i < 0 {
				add("job %s: matrix line %q is not a release line", name, line)
				continue
			}
			covered[line] = true
			m := kindNodeImage.FindStringSubmatch(node)
			if m == nil {
				add("job %s: line %s: node %q is not kindest/node:v1.<minor>.<patch>@sha256:<digest>", name, line, node)
				continue
			}
			if minor, _ := strconv.Atoi(m[1]); minor != f.lines[i].Minor && minor != f.lines[i].Minor+1 {
				add("job %s: line %s on %s: the line serves Kubernetes 1.%d and 1.%d only", name, line, node, f.lines[i].Minor, f.lines[i].Minor+1)
			}
		}
		for _, l := range f.lines {
			if !covered[l.Line] {
				add("job %s: release line %s has no kind job (a matrix entry with its line and a node it serves)", name, l.Line)
			}
		}
		if job.Env["KIND_NODE_IMAGE"] != "${{ matrix.node }}" || job.Env["EXPECT_LINE"] != "${{ matrix.line }}" {
			add("job %s: env does not hand the matrix to the script (KIND_NODE_IMAGE: ${{ matrix.node }}, EXPECT_LINE: ${{ matrix.line }})", name)
		}
		if m := regexp.MustCompile(`(?m)^KIND_NODE_IMAGE=\$\{KIND_NODE_IMAGE:-(\S+)\}$`).FindStringSubmatch(f.script); m == nil || !slices.Contains(nodes, m[1]) {
			add("%s: its default KIND_NODE_IMAGE is not one of the workflow's nodes %q", kindScript, nodes)
		}

		var stages []string
		diagnosed := false
		for _, st := range job.Steps {
			if strings.HasPrefix(st.Uses, "actions/setup-go@") {
				if v := fmt.Sprint(st.With["go-version"]); v != f.dockerfileGo {
					add("job %s: setup-go go-version %q, want the Dockerfile's exact golang:%s", name, v, f.dockerfileGo)
				}
			}
			run := strings.TrimSpace(st.Run)
			if run == "" {
				continue
			}
			m := scriptStage.FindStringSubmatch(run)
			switch {
			case m == nil:
				add("job %s: step %q: the job's steps run %s <stage>, so that a developer runs the same", name, run, kindScript)
			case m[1] == "diagnose":
				diagnosed = st.If == "failure()"
			case st.If != "":
				add("job %s: stage %s runs only if %s", name, m[1], st.If)
			default:
				stages = append(stages, m[1])
			}
		}
		if !slices.Equal(stages, kindStages) {
			add("job %s: runs the stages %q, want %q", name, stages, kindStages)
		}
		if !diagnosed {
			add("job %s: no %s diagnose step with if: failure()", name, kindScript)
		}
	}

	// The script.
	if f.scriptMode&0o111 == 0 {
		add("%s is not executable (mode %v)", kindScript, f.scriptMode)
	}
	if !strings.Contains(f.script, "\nset -euo pipefail\n") {
		add("%s: no set -euo pipefail", kindScript)
	}
	install := shellFunc(f.script, "stage_install")
	steps := []struct{ what, re string }{
		{"builds the line's image from the commit for one platform (make image VERSION= LINES=<line> PLATFORMS=<one>)", `make image VERSION="\$version" LINES="\$line" PLATFORMS="\$platform"`},
		{"pushes it (go run ./hack/release push)", `go run \./hack/release push --repository "\$REGISTRY/pool-scheduler" --layout`},
		{"packages the chart of the commit with the commit's version (helm package manifests/charts/pool-scheduler --version --app-version)", `helm package manifests/charts/pool-scheduler --version "\$chart_version" --app-version "\$version"`},
		{"pushes the chart to an OCI registry (helm push ... oci://)", `helm push \S+ "oci://\$REGISTRY/charts"`},
		{"installs it from there (helm install pool-scheduler oci://... --version)", `helm install pool-scheduler "oci://\$REGISTRY/charts/pool-scheduler" --version "\$chart_version"`},
	}
	at := -1
	for _, s := range steps {
		loc := regexp.MustCompile(s.re).FindStringIndex(install)
		switch {
		case loc == nil:
			add("%s install: does not %s", kindScript, s.what)
		case loc[0] < at:
			add("%s install: %s out of order", kindScript, s.what)
		default:
			at = loc[0]
		}
	}
	if !regexp.MustCompile(`(?m)^    "\$line": "\$digest"$`).MatchString(install) {
		add("%s install: the chart is not given the pushed digest for the line (image.digests)", kindScript)
	}
	scenario := shellFunc(f.script, "stage_scenario")
	for _, want := range []string{
		profile.NamespaceLabel + "=true",
		"apiVersion: labels.banzaicloud.io/v1alpha1\nkind: NodePoolLabelSet",
		"poll 180 \"a FailedScheduling event on pod held",
		`--for=jsonpath='{.spec.nodeName}'="$spot" pod/held`,
	} {
		if !strings.Contains(scenario, want) {
			add("%s scenario: no %q", kindScript, want)
		}
	}
	if m := regexp.MustCompile(`(?m)^HELD_REASON="(.*)"$`).FindStringSubmatch(f.script); m == nil || m[1] != pool.LabelsNotApplied.String() {
		add("%s: HELD_REASON is not NodePoolReady's reason for missing pool labels, %q", kindScript, pool.LabelsNotApplied.String())
	}
	if m := regexp.MustCompile(`(?m)^POOL_KEY=(\S+)$`).FindStringSubmatch(f.script); m == nil || !slices.Contains(configv1.DefaultPoolLabelKeys, m[1]) {
		add("%s: POOL_KEY is not one of the default pool label keys", kindScript)
	}
	return problems
}

// TestKindWorkflow checks .github/workflows/kind.yaml and hack/kind-smoke.sh with
// checkKindWorkflow (they cannot run here: no container engine), that the check catches each
// thing it is for, that the script parses (bash -n), and lints the workflow with actionlint at
// make verify's pinned version where its module can be had.
func TestKindWorkflow(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "kind.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	release, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FROM golang:(\S+) AS build$`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatalf("the Dockerfile's build stage is not FROM golang:<version> AS build")
	}
	scriptPath := filepath.Join(root, kindScript)
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	facts := kindFacts{
		lines:        releaselines.All(t),
		dockerfileGo: string(m[1]),
		releasePins:  actionPins(release),
		script:       string(script),
		scriptMode:   info.Mode(),
	}
	wf := string(data)
	replace := func(in *string, old, new string) func(t *testing.T) {
		return func(t *testing.T) {
			if !strings.Contains(*in, old) {
				t.Fatalf("no %q to change", old)
			}
			*in = strings.ReplaceAll(*in, old, new)
		}
	}
	cases := []struct {
		name   string
		change func(wf *string, f *kindFacts) func(t *testing.T)
		want   string
	}{
		{name: "as committed"},
		{name: "a floating action tag", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0", "actions/checkout@v4")
		}, want: "action not pinned to a commit"},
		{name: "an action pinned apart from the release workflow", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0", "actions/checkout@"+strings.Repeat("a", 40)+" # v4.4.0")
		}, want: "the release workflow pins actions/checkout@"},
		{name: "a floating Go version", change: func(wf *string, f *kindFacts) func(*testing.T) {
			return replace(wf, `go-version: "`+f.dockerfileGo+`"`, `go-version: "1.26.x"`)
		}, want: `setup-go go-version "1.26.x"`},
		{name: "not on pull requests", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "  pull_request:\n", "")
		}, want: "not triggered on pull_request"},
		{name: "write permission", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "permissions:\n  contents: read\n", "permissions:\n  contents: write\n")
		}, want: "not contents: read alone"},
		{name: "a secret", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "      EXPECT_LINE: ${{ matrix.line }}\n", "      EXPECT_LINE: ${{ matrix.line }}\n      TOKEN: ${{ secrets.GITHUB_TOKEN }}\n")
		}, want: "reads secrets"},
		{name: "a node image by tag", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5", "kindest/node:v1.36.1")
		}, want: `node "kindest/node:v1.36.1" is not`},
		{name: "a line without a kind job", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, `line: "1.34"`, `line: "1.36"`)
		}, want: "release line 1.34 has no kind job"},
		{name: "a node the line does not serve", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "kindest/node:v1.35.5@", "kindest/node:v1.37.5@")
		}, want: "the line serves Kubernetes 1.34 and 1.35 only"},
		{name: "no scenario", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "        run: hack/kind-smoke.sh scenario\n", "        run: hack/kind-smoke.sh diagnose\n")
		}, want: `runs the stages ["tools" "cluster" "install"]`},
		{name: "no diagnostics on failure", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "        if: failure()\n", "")
		}, want: "no hack/kind-smoke.sh diagnose step with if: failure()"},
		{name: "install inline in the workflow", change: func(wf *string, _ *kindFacts) func(*testing.T) {
			return replace(wf, "run: hack/kind-smoke.sh install", "run: helm install pool-scheduler manifests/charts/pool-scheduler")
		}, want: `step "helm install pool-scheduler manifests/charts/pool-scheduler"`},
		{name: "the chart installed from the checkout, not the registry", change: func(_ *string, f *kindFacts) func(*testing.T) {
			return replace(&f.script, `helm install pool-scheduler "oci://$REGISTRY/charts/pool-scheduler"`, `helm install pool-scheduler manifests/charts/pool-scheduler`)
		}, want: "installs it from there"},
		{name: "every platform built", change: func(_ *string, f *kindFacts) func(*testing.T) {
			return replace(&f.script, ` PLATFORMS="$platform"`, "")
		}, want: "does not builds the line's image"},
		{name: "the digest not given to the chart", change: func(_ *string, f *kindFacts) func(*testing.T) {
			return replace(&f.script, `    "$line": "$digest"`, `    "$line": ""`)
		}, want: "not given the pushed digest"},
		{name: "another reason held for", change: func(_ *string, f *kindFacts) func(*testing.T) {
			return replace(&f.script, `HELD_REASON="node's pool labels are not applied yet"`, `HELD_REASON="pool labels missing"`)
		}, want: "HELD_REASON is not NodePoolReady's reason"},
		{name: "the script not executable", change: func(_ *string, f *kindFacts) func(*testing.T) {
			return func(*testing.T) { f.scriptMode = 0o644 }
		}, want: "is not executable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, f := wf, facts
			if tc.change != nil {
				tc.change(&w, &f)(t)
			}
			problems := checkKindWorkflow([]byte(w), f)
			if tc.want == "" {
				if diff := cmp.Diff([]string(nil), problems); diff != "" {
					t.Errorf("kind.yaml, %s (-want +got):\n%s", kindScript, diff)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q, want one containing %q", problems, tc.want)
			}
		})
	}

	t.Run("bash -n", func(t *testing.T) {
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash")
		}
		if out, err := exec.Command(bash, "-n", scriptPath).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", kindScript, err, out)
		}
	})

	t.Run("actionlint", func(t *testing.T) { actionlint(t, root, ".github/workflows/kind.yaml") })
}

// actionlint runs actionlint, at make verify's pinned version (hack/versions.env), on a workflow
// (with shellcheck on its run: blocks where shellcheck is on PATH). It is built outside go.mod,
// as make verify runs it (its dependencies stay its own); without the module proxy or the module
// in the cache the test is skipped, and make verify still lints every workflow.
func actionlint(t *testing.T, root, workflow string) {
	version, err := releaselines.EnvValue(filepath.Join(root, "hack", "versions.env"), "ACTIONLINT_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := t.TempDir()
	install := exec.Command(goBin, "install", "github.com/rhysd/actionlint/cmd/actionlint@"+version)
	// Outside the module, without the test's GOFLAGS (a line's -modfile and tags).
	install.Dir = bin
	install.Env = append(os.Environ(), "GOFLAGS=", "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("github.com/rhysd/actionlint@")) {
			t.Skipf("actionlint %s cannot be had here (make verify lints the workflows): %v\n%s", version, err, out)
		}
		t.Fatalf("go install actionlint@%s: %v\n%s", version, err, out)
	}
	cmd := exec.Command(filepath.Join(bin, "actionlint"), "-no-color", workflow)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("actionlint %s %s: %v\n%s", version, workflow, err, out)
	}
}
