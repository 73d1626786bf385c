package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var (
	chartDir  = filepath.Join(repoRoot(), "manifests", "charts", "pool-scheduler")
	testImage = Image{Repository: "ghcr.io/pool-scheduler/pool-scheduler", Tag: "v1.2.3", Digest: "sha256:" + strings.Repeat("0123456789abcdef", 4)}
)

// decodeAll splits a YAML stream into objects.
func decodeAll(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// pullPolicies lists the imagePullPolicy of a workload's containers.
func pullPolicies(obj map[string]any) []string {
	spec, _ := nested(obj, "spec", "template", "spec").(map[string]any)
	var out []string
	list, _ := spec["containers"].([]any)
	for _, c := range list {
		out = append(out, strings.TrimSpace(toString(c.(map[string]any)["imagePullPolicy"])))
	}
	return out
}

func toString(v any) string {
	if v == nil {
		return ""
	}
	return v.(string)
}

// renderPackagedChart renders a packaged chart with every optional workload on, as `helm
// template` would, and returns the objects.
func renderPackagedChart(t *testing.T, path string) []map[string]any {
	t.Helper()
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, map[string]any{"labeler": map[string]any{"domain": map[string]any{"enabled": true}}},
		chartutil.ReleaseOptions{Name: "pool-scheduler", Namespace: "pool-scheduler", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for name, content := range files {
		if strings.HasSuffix(name, ".yaml") {
			out = append(out, decodeAll(t, []byte(content))...)
		}
	}
	return out
}

// TestPackageChart: the packaged chart carries the release as version and appVersion, runs the
// release's image by tag and digest in every workload (scheduler, labeler controller, domain
// labeler) with pull policy IfNotPresent, keeps values.yaml's comments, and passes Helm's lint.
func TestPackageChart(t *testing.T) {
	out := t.TempDir()
	path, err := PackageChart(chartDir, out, testImage)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "pool-scheduler-1.2.3.tgz" {
		t.Errorf("packaged as %s", filepath.Base(path))
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("version %q appVersion %q, want 1.2.3 and v1.2.3", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	var workloads int
	for _, obj := range renderPackagedChart(t, path) {
		images := ContainerImages(obj)
		if len(images) == 0 || obj["kind"] == "Pod" {
			continue
		}
		workloads++
		for _, img := range images {
			if img != testImage.Ref() {
				t.Errorf("%s %v runs %s, want %s", obj["kind"], nested(obj, "metadata", "name"), img, testImage.Ref())
			}
		}
		for _, p := range pullPolicies(obj) {
			if p != "IfNotPresent" {
				t.Errorf("%s %v: imagePullPolicy %q", obj["kind"], nested(obj, "metadata", "name"), p)
			}
		}
	}
	if workloads != 4 {
		t.Errorf("%d workloads rendered, want 4 (scheduler, admission webhook, labeler controller, domain labeler)", workloads)
	}
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" && !strings.Contains(string(f.Data), "# Default values for the pool-scheduler chart.") {
			t.Errorf("values.yaml lost its comments:\n%s", f.Data)
		}
	}
	// Lint the packaged chart as unpacked by helm.
	dir := t.TempDir()
	if err := chartutil.SaveDir(ch, dir); err != nil {
		t.Fatal(err)
	}
	problems, _, err := LintChart(filepath.Join(dir, "pool-scheduler"), "pool-scheduler", "v1.34.10", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("helm lint: %s", p)
	}
}

// TestLintChartFindsProblems: the lint the chart passes in make verify reports a value the schema
// refuses (image.tag: latest) and a template that does not render, so passing it means something.
func TestLintChartFindsProblems(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := chartutil.SaveDir(ch, dir); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "pool-scheduler")
	if err := os.WriteFile(filepath.Join(bad, "templates", "broken.yaml"), []byte("kind: ConfigMap\nmetadata:\n  name: {{ .Values.nope.missing }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		// Schema validation stops before templates are rendered, so one problem at a time.
		{"value the schema refuses", map[string]any{"image": map[string]any{"tag": "latest"}}, "/image/tag"},
		{"template that does not render", nil, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, _, err := LintChart(bad, "pool-scheduler", "v1.34.10", tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if joined := strings.Join(problems, "\n"); !strings.Contains(joined, tc.want) {
				t.Errorf("lint findings do not mention %q:\n%s", tc.want, joined)
			}
		})
	}
}

// TestPackageChartRefusesBadInput: a release version that is not vX.Y.Z (latest included), or a
// digest that is not sha256, is refused with the field named.
func TestPackageChartRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		img  Image
		want string
	}{
		{"latest", Image{testImage.Repository, "latest", testImage.Digest}, `version "latest"`},
		{"no v", Image{testImage.Repository, "1.2.3", testImage.Digest}, `version "1.2.3"`},
		{"short digest", Image{testImage.Repository, "v1.2.3", "sha256:abc"}, `image digest "sha256:abc"`},
		{"tagged repository", Image{testImage.Repository + ":x", "v1.2.3", testImage.Digest}, "image repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PackageChart(chartDir, t.TempDir(), tc.img)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRenderBundles: each install YAML is the kustomize render of its directories (objects in
// `kubectl kustomize` order: namespace and CRD before what uses them), every container runs the
// release's image by tag and digest with pull policy IfNotPresent, and the files together hold
// the scheduler, the labeler controller, the domain labeler and every admission policy.
func TestRenderBundles(t *testing.T) {
	kinds := map[string]bool{}
	for _, b := range Bundles {
		data, err := RenderBundle(repoRoot(), b.Dirs, testImage)
		if err != nil {
			t.Fatal(err)
		}
		objs := decodeAll(t, data)
		for i, obj := range objs {
			kinds[obj["kind"].(string)+"/"+toString(nested(obj, "metadata", "name"))] = true
			if (obj["kind"] == "Namespace" || obj["kind"] == "CustomResourceDefinition") && i > 1 {
				t.Errorf("%s: %s is object %d; namespaces and CRDs come first", b.File, obj["kind"], i)
			}
			for _, img := range ContainerImages(obj) {
				if obj["kind"] == "ValidatingAdmissionPolicy" {
					continue
				}
				if img != testImage.Ref() {
					t.Errorf("%s: %s %v runs %s", b.File, obj["kind"], nested(obj, "metadata", "name"), img)
				}
			}
			if len(ContainerImages(obj)) > 0 {
				for _, p := range pullPolicies(obj) {
					if p != "IfNotPresent" {
						t.Errorf("%s: %s %v imagePullPolicy %q", b.File, obj["kind"], nested(obj, "metadata", "name"), p)
					}
				}
			}
		}
	}
	for _, want := range []string{"Deployment/pool-scheduler", "Deployment/pool-labeler", "DaemonSet/pool-labeler-domain", "CustomResourceDefinition/nodepoollabelsets.labels.banzaicloud.io", "Namespace/pool-scheduler",
		"ValidatingAdmissionPolicy/pool-scheduler-volume-binding", "ValidatingAdmissionPolicy/pool-labeler-managed-labels",
		"ValidatingAdmissionPolicy/pool-labeler-domain-own-node", "ValidatingAdmissionPolicy/pool-scheduler-system-pods"} {
		if !kinds[want] {
			t.Errorf("no %s in the install YAMLs", want)
		}
	}
}

// TestCheckImagesRefusesOtherImages: a workload whose image the release's kustomization does
// not rewrite (another name) fails the render instead of shipping its own tag.
func TestCheckImagesRefusesOtherImages(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n      - name: x\n        image: example.com/other:latest\n")
	err := checkImages(doc, testImage)
	if err == nil || !strings.Contains(err.Error(), `runs image "example.com/other:latest"`) {
		t.Errorf("error %v", err)
	}
}

// TestRepositoryManifestsNameARelease: between releases, the chart and the kustomize manifests
// point at one release tag (the chart's appVersion), never latest, with pull policy
// IfNotPresent, and the chart's version is that release without its v.
func TestRepositoryManifestsNameARelease(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	app := ch.Metadata.AppVersion
	if !versionRE.MatchString(app) {
		t.Fatalf("Chart.yaml appVersion %q is not a release tag vX.Y.Z", app)
	}
	if ch.Metadata.Version != strings.TrimPrefix(app, "v") {
		t.Errorf("Chart.yaml version %q, appVersion %q", ch.Metadata.Version, app)
	}
	if tag := nested(ch.Values, "image", "tag"); tag != "" {
		t.Errorf("values.yaml image.tag %q; leave it empty so appVersion is used", tag)
	}
	if p := nested(ch.Values, "image", "pullPolicy"); p != "IfNotPresent" {
		t.Errorf("values.yaml image.pullPolicy %q", p)
	}
	want := "ghcr.io/pool-scheduler/pool-scheduler:" + app
	var found int
	err = filepath.WalkDir(filepath.Join(repoRoot(), "manifests"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") || strings.Contains(p, string(filepath.Separator)+"charts"+string(filepath.Separator)) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if regexp.MustCompile(`image:\s*\S+:latest\b`).Match(data) {
			t.Errorf("%s uses a :latest image", p)
		}
		for _, obj := range decodeAll(t, data) {
			for i, img := range ContainerImages(obj) {
				if !strings.HasPrefix(img, "ghcr.io/pool-scheduler/") {
					continue
				}
				found++
				if img != want {
					t.Errorf("%s: image %s, want %s (the chart's appVersion)", p, img, want)
				}
				if pp := pullPolicies(obj); pp[i] != "IfNotPresent" {
					t.Errorf("%s: imagePullPolicy %q", p, pp[i])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != 4 {
		t.Errorf("%d pool-scheduler containers in manifests/, want 4 (scheduler, admission webhook, labeler controller, domain labeler)", found)
	}
}

// krewPlugin is krew's index.Plugin (sigs.k8s.io/krew/pkg/index, v0.4.4), the fields its
// validation reads.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector *metav1.LabelSelector `json:"selector"`
			URI      string                `json:"uri"`
			SHA256   string                `json:"sha256"`
			Bin      string                `json:"bin"`
			Files    []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest fills plugins/pool.yaml and checks it against the rules of krew's own
// validation (internal/index/validation/validate.go in sigs.k8s.io/krew v0.4.4, not importable):
// apiVersion, kind, a safe name, a one-line short description, a SemVer version, and per
// platform a selector on os/arch only, a uri, a sha256 of 64 hex digits and bin; and that each
// platform names its own archive.
func TestKrewManifest(t *testing.T) {
	platforms := []PluginPlatform{
		{OS: "linux", Arch: "amd64", URI: "https://example.com/v1.2.3/kubectl-pool_v1.2.3_linux_amd64.tar.gz", SHA256: strings.Repeat("a", 64)},
		{OS: "darwin", Arch: "arm64", URI: "https://example.com/v1.2.3/kubectl-pool_v1.2.3_darwin_arm64.tar.gz", SHA256: strings.Repeat("b", 64)},
	}
	data, err := KrewManifest(filepath.Join(repoRoot(), "plugins", "pool.yaml"), "v1.2.3", platforms)
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatalf("manifest is not YAML: %v\n%s", err, data)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q kind %q", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "pool" {
		t.Errorf("name %q; kubectl runs `kubectl pool` from kubectl-pool", p.Metadata.Name)
	}
	if p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n") {
		t.Errorf("shortDescription %q", p.Spec.ShortDescription)
	}
	if p.Spec.Version != "v1.2.3" {
		t.Errorf("version %q", p.Spec.Version)
	}
	if len(p.Spec.Platforms) != len(platforms) {
		t.Fatalf("%d platforms, want %d", len(p.Spec.Platforms), len(platforms))
	}
	for i, pl := range p.Spec.Platforms {
		want := platforms[i]
		if pl.Selector == nil || !cmp.Equal(pl.Selector.MatchLabels, map[string]string{"os": want.OS, "arch": want.Arch}) || len(pl.Selector.MatchExpressions) != 0 {
			t.Errorf("platform %d selector %+v", i, pl.Selector)
		}
		if pl.URI != want.URI || pl.SHA256 != want.SHA256 || !regexp.MustCompile(`^[a-f0-9]{64}$`).MatchString(pl.SHA256) {
			t.Errorf("platform %d uri %q sha256 %q", i, pl.URI, pl.SHA256)
		}
		if pl.Bin != "kubectl-pool" {
			t.Errorf("platform %d bin %q", i, pl.Bin)
		}
		var from []string
		for _, f := range pl.Files {
			from = append(from, f.From)
		}
		if !slices.Contains(from, "kubectl-pool") || !slices.Contains(from, "LICENSE") {
			t.Errorf("platform %d extracts %v, want kubectl-pool and LICENSE", i, from)
		}
	}
	if _, err := KrewManifest(filepath.Join(repoRoot(), "plugins", "pool.yaml"), "latest", platforms); err == nil {
		t.Error("a manifest for version latest was made")
	}
}

// TestPluginArchive: the archive holds kubectl-pool, executable, with the binary's bytes, and
// the same input gives the same bytes (so SHA256SUMS and the krew manifest are stable).
func TestPluginArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "poolctl")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	license := filepath.Join(repoRoot(), "LICENSE")
	at := time.Unix(1700000000, 0)
	var sums []string
	for i := range 2 {
		out := filepath.Join(dir, "a"+string(rune('0'+i))+".tar.gz")
		if err := PluginArchive(bin, license, out, at); err != nil {
			t.Fatal(err)
		}
		sum, err := FileSHA256(out)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if h.Name != "kubectl-pool" || h.Mode&0o111 == 0 || string(body) != "binary" {
			t.Errorf("entry %s mode %o body %q", h.Name, h.Mode, body)
		}
		// krew wants the license in the archive.
		h, err = tr.Next()
		if err != nil {
			t.Fatalf("no second entry (LICENSE): %v", err)
		}
		body, _ = io.ReadAll(tr)
		f.Close()
		if h.Name != "LICENSE" || !strings.Contains(string(body), "Apache License") {
			t.Errorf("second entry %s, want the Apache-2.0 LICENSE", h.Name)
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("same input, different archives: %v", sums)
	}
}

// TestWriteChecksums: SHA256SUMS lists every file but itself, in the format sha256sum -c reads.
func TestWriteChecksums(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"b.yaml": "b", "a.tgz": "a"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second run does not list the first SHA256SUMS
		if err := WriteChecksums(dir); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a.tgz\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.yaml\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("SHA256SUMS (-want +got):\n%s", diff)
	}
}
