package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var (
	chartDir  = filepath.Join(repoRoot(), "manifests", "charts", "pool-scheduler")
	testImage = Image{Repository: "ghcr.io/pool-scheduler/pool-scheduler", Version: "v1.2.3", Line: "1.34", Digest: "sha256:" + strings.Repeat("0123456789abcdef", 4)}
)

// testRelease is a release v1.2.3 with an image of every line the repository builds, each with
// its own digest.
func testRelease(t *testing.T) Release {
	t.Helper()
	rel := Release{Repository: testImage.Repository, Version: "v1.2.3", Digests: map[string]string{}}
	for _, l := range releaselines.All(t) {
		rel.Digests[l.Line] = lineDigest(l.Line)
	}
	return rel
}

// lineDigest is a digest of its own for each line.
func lineDigest(line string) string {
	sum := sha256.Sum256([]byte(line))
	return "sha256:" + hex.EncodeToString(sum[:])
}

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
// template --kube-version` (or an install on a cluster of that version) would, and returns the
// objects.
func renderPackagedChart(t *testing.T, path, kubeVersion string) []map[string]any {
	t.Helper()
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	vals, err := chartutil.ToRenderValues(ch, map[string]any{"labeler": map[string]any{"domain": map[string]any{"enabled": true}}},
		chartutil.ReleaseOptions{Name: "pool-scheduler", Namespace: "pool-scheduler", IsInstall: true}, caps)
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

// TestPackageChart: the packaged chart carries the release as version and appVersion, and on a
// cluster of each minor a line serves (its own and the next) runs that line's image of the
// release, <repository>:<release>-k8s<line>@<that line's digest>, in every workload (scheduler,
// admission webhook, labeler controller, domain labeler) with pull policy IfNotPresent; it
// keeps values.yaml's comments, leaves image.tag empty, and passes Helm's lint on each line.
func TestPackageChart(t *testing.T) {
	rel := testRelease(t)
	out := t.TempDir()
	path, err := PackageChart(chartDir, out, rel)
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
	if tag := nested(ch.Values, "image", "tag"); tag != "" {
		t.Errorf("image.tag %q, want empty (appVersion and the line name the image)", tag)
	}
	for _, l := range releaselines.All(t) {
		want := rel.Image(l.Line).Ref()
		if !strings.HasSuffix(want, ":v1.2.3-k8s"+l.Line+"@"+lineDigest(l.Line)) {
			t.Fatalf("the release's ref of line %s is %s", l.Line, want)
		}
		for _, minor := range []int{l.Minor, l.Minor + 1} {
			kube := fmt.Sprintf("v1.%d.4", minor)
			t.Run("cluster "+kube, func(t *testing.T) {
				var workloads int
				for _, obj := range renderPackagedChart(t, path, kube) {
					images := ContainerImages(obj)
					if len(images) == 0 || obj["kind"] == "Pod" {
						continue
					}
					workloads++
					for _, img := range images {
						if img != want {
							t.Errorf("%s %v runs %s, want line %s's %s", obj["kind"], nested(obj, "metadata", "name"), img, l.Line, want)
						}
					}
					for _, p := range pullPolicies(obj) {
						if p != "IfNotPresent" {
							t.Errorf("%s %v: imagePullPolicy %q", obj["kind"], nested(obj, "metadata", "name"), p)
						}
					}
				}
				if workloads != 8 {
					t.Errorf("%d workloads rendered, want 8 (scheduler, admission webhook, certificate keeper, labeler controller, domain labeler, hand-off controller, spread keeper, uninstall hook)", workloads)
				}
			})
		}
	}
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" && !strings.Contains(string(f.Data), "# Default values for the pool-scheduler chart.") {
			t.Errorf("values.yaml lost its comments:\n%s", f.Data)
		}
	}
	// Lint the packaged chart as unpacked by helm, against each line's Kubernetes.
	dir := t.TempDir()
	if err := chartutil.SaveDir(ch, dir); err != nil {
		t.Fatal(err)
	}
	for _, l := range releaselines.All(t) {
		problems, _, err := LintChart(filepath.Join(dir, "pool-scheduler"), "pool-scheduler", l.KubeVersion, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("helm lint (Kubernetes %s): %s", l.KubeVersion, p)
		}
	}
}

// TestPackageChartNeedsEveryLine: a release without an image of a line the chart serves (its
// clusters would pull a tag never pushed), or with an image of a line the chart does not know,
// is refused, naming the lines on both sides.
func TestPackageChartNeedsEveryLine(t *testing.T) {
	all := testRelease(t)
	lines := all.Lines()
	missing := Release{Repository: all.Repository, Version: all.Version, Digests: maps.Clone(all.Digests)}
	delete(missing.Digests, lines[len(lines)-1])
	extra := Release{Repository: all.Repository, Version: all.Version, Digests: maps.Clone(all.Digests)}
	extra.Digests["1.99"] = lineDigest("1.99")
	for name, rel := range map[string]Release{"the newest line missing": missing, "an unknown line": extra} {
		t.Run(name, func(t *testing.T) {
			want := fmt.Sprintf("image.digests lists the release lines %v, the release has images of %v", lines, rel.Lines())
			if len(rel.Digests) == 0 {
				want = "has no image" // the repository builds one line only
			}
			_, err := PackageChart(chartDir, t.TempDir(), rel)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one containing %q", err, want)
			}
		})
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
	for _, tt := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		// Schema validation stops before templates are rendered, so one problem at a time.
		{"value the schema refuses", map[string]any{"image": map[string]any{"tag": "latest"}}, "/image/tag"},
		{"template that does not render", nil, "nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			problems, _, err := LintChart(bad, "pool-scheduler", "v1.34.10", tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if joined := strings.Join(problems, "\n"); !strings.Contains(joined, tt.want) {
				t.Errorf("lint findings do not mention %q:\n%s", tt.want, joined)
			}
		})
	}
}

// TestPackageChartRefusesBadInput: a release version that is not vX.Y.Z (latest included), a
// digest that is not sha256, a repository with a tag, a line that is not a Kubernetes minor, or
// no image at all is refused with the field named.
func TestPackageChartRefusesBadInput(t *testing.T) {
	rel := func(version, repo string, line, digest string) Release {
		r := testRelease(t)
		r.Version, r.Repository = version, repo
		if line != "" {
			r.Digests[line] = digest
		}
		return r
	}
	d := testImage.Digest
	for _, tt := range []struct {
		name string
		rel  Release
		want string
	}{
		{"latest", rel("latest", testImage.Repository, "", ""), `version "latest"`},
		{"no v", rel("1.2.3", testImage.Repository, "", ""), `version "1.2.3"`},
		{"short digest", rel("v1.2.3", testImage.Repository, "1.34", "sha256:abc"), `line 1.34: image digest "sha256:abc"`},
		{"tagged repository", rel("v1.2.3", testImage.Repository+":x", "", ""), "image repository"},
		{"line not a minor", rel("v1.2.3", testImage.Repository, "136", d), `release line "136"`},
		{"no image", Release{Repository: testImage.Repository, Version: "v1.2.3"}, "has no image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PackageChart(chartDir, t.TempDir(), tt.rel)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestRenderRelease: a release's install YAMLs are install-k8s<line>.yaml and
// install-domain-labeler-k8s<line>.yaml for every line (they run the image),
// install-admission-policy-k8s<line>.yaml for every line (no image, but its
// MutatingAdmissionPolicy is v1beta1 before 1.36 and v1 from 1.36, where v1beta1 is off by
// default) and one install-system-pod-policy.yaml (no image); each is the
// kustomize render of its directories (objects in `kubectl kustomize` order: namespace and CRD
// before what uses them), every container of a line's files runs that line's image of the
// release by tag and digest with pull policy IfNotPresent, and each line's files with the shared
// ones hold the scheduler, the labeler controller, the domain labeler and every admission policy.
func TestRenderRelease(t *testing.T) {
	rel := testRelease(t)
	files, err := RenderRelease(repoRoot(), rel)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"install-system-pod-policy.yaml"}
	for _, l := range rel.Lines() {
		wantNames = append(wantNames, "install-k8s"+l+".yaml", "install-domain-labeler-k8s"+l+".yaml", "install-admission-policy-k8s"+l+".yaml")
	}
	slices.Sort(wantNames)
	if diff := cmp.Diff(wantNames, slices.Sorted(maps.Keys(files))); diff != "" {
		t.Fatalf("install YAML files (-want +got):\n%s", diff)
	}
	kinds := map[string]map[string]bool{} // by line
	for _, l := range rel.Lines() {
		kinds[l] = map[string]bool{}
	}
	for name, data := range files {
		line := ""
		if m := regexp.MustCompile(`-k8s(1\.\d+)\.yaml$`).FindStringSubmatch(name); m != nil {
			line = m[1]
		}
		objs := decodeAll(t, data)
		var maps int
		for _, obj := range objs {
			if k := obj["kind"]; k == "MutatingAdmissionPolicy" || k == "MutatingAdmissionPolicyBinding" {
				maps++
				want := "admissionregistration.k8s.io/v1beta1"
				if minor, _ := strconv.Atoi(strings.TrimPrefix(line, "1.")); minor >= 36 {
					want = "admissionregistration.k8s.io/v1"
				}
				if obj["apiVersion"] != want {
					t.Errorf("%s: %s %v is %v, want %s on line %s", name, k, nested(obj, "metadata", "name"), obj["apiVersion"], want, line)
				}
			}
		}
		if strings.HasPrefix(name, "install-admission-policy-") && maps < 2 {
			t.Errorf("%s: %d MutatingAdmissionPolicy objects, want the policy and its binding", name, maps)
		}
		for i, obj := range objs {
			for l := range kinds {
				if line == "" || line == l {
					kinds[l][obj["kind"].(string)+"/"+toString(nested(obj, "metadata", "name"))] = true
				}
			}
			if (obj["kind"] == "Namespace" || obj["kind"] == "CustomResourceDefinition") && i > 1 {
				t.Errorf("%s: %s is object %d; namespaces and CRDs come first", name, obj["kind"], i)
			}
			images := ContainerImages(obj)
			if len(images) > 0 && line == "" {
				t.Errorf("%s: %s %v runs %v, in a file shared by every line", name, obj["kind"], nested(obj, "metadata", "name"), images)
			}
			for _, img := range images {
				if want := rel.Image(line).Ref(); img != want {
					t.Errorf("%s: %s %v runs %s, want line %s's %s", name, obj["kind"], nested(obj, "metadata", "name"), img, line, want)
				}
			}
			if len(images) > 0 {
				for _, p := range pullPolicies(obj) {
					if p != "IfNotPresent" {
						t.Errorf("%s: %s %v imagePullPolicy %q", name, obj["kind"], nested(obj, "metadata", "name"), p)
					}
				}
			}
		}
	}
	for l, got := range kinds {
		for _, want := range []string{"Deployment/pool-scheduler", "Deployment/pool-labeler", "DaemonSet/pool-labeler-domain", "CustomResourceDefinition/nodepoollabelsets.labels.banzaicloud.io", "Namespace/pool-scheduler",
			"ValidatingAdmissionPolicy/pool-scheduler-volume-binding", "ValidatingAdmissionPolicy/pool-labeler-managed-labels",
			"ValidatingAdmissionPolicy/pool-labeler-domain-own-node", "ValidatingAdmissionPolicy/pool-scheduler-system-pods"} {
			if !got[want] {
				t.Errorf("line %s: no %s in its install YAMLs", l, want)
			}
		}
	}
}

// TestReadRelease: dist reads each line's image layout and takes its index digest; a layout
// tagged for another line or another version, or a line that is not a Kubernetes minor, is
// refused with the layout and the tag it wants named.
func TestReadRelease(t *testing.T) {
	layout := func(t *testing.T, tag string) (string, string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "layout")
		// A real image index (one small random image), as ReadLayout reads make image's.
		idx, err := random.Index(64, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := ociimage.WriteLayout(dir, &ociimage.Result{Index: idx}, tag); err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return dir, d.String()
	}
	dir134, d134 := layout(t, "v1.2.3-k8s1.34")
	dir136, d136 := layout(t, "v1.2.3-k8s1.36")
	rel, err := ReadRelease(testImage.Repository, "v1.2.3", map[string]string{"1.34": dir134, "1.36": dir136})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Release{Repository: testImage.Repository, Version: "v1.2.3", Digests: map[string]string{"1.34": d134, "1.36": d136}}, rel); diff != "" {
		t.Errorf("release (-want +got):\n%s", diff)
	}
	plain, _ := layout(t, "v1.2.3")
	for _, tt := range []struct {
		name    string
		layouts map[string]string
		want    string
	}{
		{"another line's layout", map[string]string{"1.34": dir134, "1.36": dir134}, `line 1.36: the image is tagged "v1.2.3-k8s1.34", want "v1.2.3-k8s1.36"`},
		{"another version", map[string]string{"1.34": dir134}, `the image is tagged "v1.2.3-k8s1.34", want "v1.2.4-k8s1.34"`},
		{"a tag without line", map[string]string{"1.34": plain}, `the image is tagged "v1.2.3", want "v1.2.3-k8s1.34"`},
		{"a line that is not a minor", map[string]string{"134": dir134}, `release line "134"`},
		{"no layout there", map[string]string{"1.34": filepath.Join(t.TempDir(), "none")}, "line 1.34: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			version := "v1.2.3"
			if tt.name == "another version" {
				version = "v1.2.4"
			}
			_, err := ReadRelease(testImage.Repository, version, tt.layouts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
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
// point at one release (the chart's appVersion), never latest, with pull policy IfNotPresent:
// the manifests at the default line's image of it, <appVersion>-k8s<default line>; and the
// chart's version is that release without its v.
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
	// The default line's image: `kubectl apply -k manifests` serves that line's clusters (a
	// release's install YAMLs set each line's image).
	var defaultLine string
	for _, l := range releaselines.All(t) {
		if l.Default {
			defaultLine = l.Line
		}
	}
	want := "ghcr.io/pool-scheduler/pool-scheduler:" + LineTag(app, defaultLine)
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
					t.Errorf("%s: image %s, want %s (the chart's appVersion, the default line)", p, img, want)
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
	if found != 7 {
		t.Errorf("%d pool-scheduler containers in manifests/, want 7 (scheduler, admission webhook, certificate keeper, labeler controller, domain labeler, hand-off controller, spread keeper)", found)
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

// TestKrewManifest fills manifests/krew/pool.yaml.tmpl and checks it against the rules of krew's own
// validation (internal/index/validation/validate.go in sigs.k8s.io/krew v0.4.4, not importable):
// apiVersion, kind, a safe name, a one-line short description, a SemVer version, and per
// platform a selector on os/arch only, a uri, a sha256 of 64 hex digits and bin; and that each
// platform names its own archive.
func TestKrewManifest(t *testing.T) {
	platforms := []PluginPlatform{
		{OS: "linux", Arch: "amd64", URI: "https://example.com/v1.2.3/kubectl-pool_v1.2.3_linux_amd64.tar.gz", SHA256: strings.Repeat("a", 64)},
		{OS: "darwin", Arch: "arm64", URI: "https://example.com/v1.2.3/kubectl-pool_v1.2.3_darwin_arm64.tar.gz", SHA256: strings.Repeat("b", 64)},
	}
	data, err := KrewManifest(filepath.Join(repoRoot(), "manifests", "krew", "pool.yaml.tmpl"), "v1.2.3", platforms)
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
	if _, err := KrewManifest(filepath.Join(repoRoot(), "manifests", "krew", "pool.yaml.tmpl"), "latest", platforms); err == nil {
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
