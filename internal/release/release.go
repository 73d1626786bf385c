// Package release makes pool-scheduler's release artifacts from the repository's own files:
// the Helm chart packaged for one release with every release line's image pinned by digest (the
// chart picks the line serving the cluster), the kustomize manifests rendered to install YAML
// per line with that line's image, the kubectl plugin's archives and krew manifest, and
// SHA256SUMS. hack/release runs it (make release).
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/registry"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
)

// versionRE is a release version: v, then SemVer 2 (pre-releases allowed, as Helm's chart
// version requires SemVer).
var versionRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// lineRE is a release line (docs/compatibility.md): the Kubernetes minor it is built on, 1.<n>.
var lineRE = regexp.MustCompile(`^1\.(0|[1-9]\d*)$`)

// LineTag is the tag of a release line's image: <version>-k8s<line>, e.g. v0.9.0-k8s1.36. One
// repository holds every line's image; the chart runs <appVersion>-k8s<line> (templates/_helpers.tpl).
func LineTag(version, line string) string { return version + "-k8s" + line }

// CheckLine refuses a release line that is not a Kubernetes minor 1.<n>.
func CheckLine(line string) error {
	if !lineRE.MatchString(line) {
		return fmt.Errorf("release line %q: want a Kubernetes minor, 1.<n> (e.g. 1.36)", line)
	}
	return nil
}

// CheckLineTag refuses an image tag that is not the release's tag for line, so a layout built
// for another version or another line is not published under this one.
func CheckLineTag(tag, version, line string) error {
	if err := CheckLine(line); err != nil {
		return err
	}
	if want := LineTag(version, line); tag != want {
		return fmt.Errorf("line %s: the image is tagged %q, want %q (<version>-k8s<line>; make image VERSION=%s builds it)", line, tag, want, version)
	}
	return nil
}

// Image is one release line's released image: repository:<version>-k8s<line>@<index digest>.
type Image struct {
	Repository, Version, Line, Digest string
}

// Tag is the image's tag, LineTag(Version, Line).
func (i Image) Tag() string { return LineTag(i.Version, i.Line) }

// Ref is repository:tag@digest, what the chart and the install YAML run on the line's clusters.
func (i Image) Ref() string { return i.Repository + ":" + i.Tag() + "@" + i.Digest }

func (i Image) validate() error {
	if !versionRE.MatchString(i.Version) {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v0.1.0", i.Version)
	}
	if err := CheckLine(i.Line); err != nil {
		return err
	}
	if !digestRE.MatchString(i.Digest) {
		return fmt.Errorf("line %s: image digest %q: want sha256:<64 hex digits>", i.Line, i.Digest)
	}
	if i.Repository == "" || strings.ContainsAny(i.Repository, ":@ ") {
		return fmt.Errorf("image repository %q: want a name without tag or digest, e.g. ghcr.io/pool-scheduler/pool-scheduler", i.Repository)
	}
	return nil
}

// Release is what a release publishes: one image per release line, all in one repository.
type Release struct {
	Repository, Version string
	// Digests holds each line's image index digest, by line ("1.36": "sha256:...").
	Digests map[string]string
}

// Image is the release's image of one line.
func (r Release) Image(line string) Image {
	return Image{Repository: r.Repository, Version: r.Version, Line: line, Digest: r.Digests[line]}
}

// Lines lists the release's lines, oldest first.
func (r Release) Lines() []string {
	lines := make([]string, 0, len(r.Digests))
	for l := range r.Digests {
		lines = append(lines, l)
	}
	sortLines(lines)
	return lines
}

func (r Release) validate() error {
	if len(r.Digests) == 0 {
		return fmt.Errorf("release %s has no image: every release line needs one", r.Version)
	}
	for _, l := range r.Lines() {
		if err := r.Image(l).validate(); err != nil {
			return err
		}
	}
	return nil
}

// ReadRelease reads each release line's OCI image layout (make image; layouts by line) and
// returns the release of their index digests. A layout must be tagged <version>-k8s<line>: one
// of another version or line (a stale _output, a mistyped line) is refused.
func ReadRelease(repo, version string, layouts map[string]string) (Release, error) {
	rel := Release{Repository: repo, Version: version, Digests: map[string]string{}}
	lines := slices.Collect(maps.Keys(layouts))
	sortLines(lines)
	for _, line := range lines {
		dir := layouts[line]
		l, err := ociimage.ReadLayout(dir)
		if err != nil {
			return rel, fmt.Errorf("line %s: %w", line, err)
		}
		if err := CheckLineTag(l.Tag, version, line); err != nil {
			return rel, fmt.Errorf("%s: %w", dir, err)
		}
		d, err := l.Index.Digest()
		if err != nil {
			return rel, fmt.Errorf("line %s: %w", line, err)
		}
		rel.Digests[line] = d.String()
	}
	return rel, rel.validate()
}

// sortLines orders lines by minor (1.9 before 1.10); lines that do not parse go last, by name.
func sortLines(lines []string) {
	minor := func(l string) int {
		if m := lineRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return 1 << 30
	}
	sort.Slice(lines, func(i, j int) bool {
		if a, b := minor(lines[i]), minor(lines[j]); a != b {
			return a < b
		}
		return lines[i] < lines[j]
	})
}

// PackageChart packages the chart in chartDir into outDir for a release: version = the release
// without its "v" (Helm chart versions are bare SemVer), appVersion = the release, and
// values.yaml's image.repository and image.digests (each line's index digest) set, image.tag
// left empty (comments kept), so the chart installs <repository>:<release>-k8s<line>@<digest> of
// the line serving the cluster. The release must have an image for exactly the lines the chart
// lists in image.digests. It returns the .tgz path.
func PackageChart(chartDir, outDir string, rel Release) (string, error) {
	if err := rel.validate(); err != nil {
		return "", err
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	ch.Metadata.Version = strings.TrimPrefix(rel.Version, "v")
	ch.Metadata.AppVersion = rel.Version
	var raw *chart.File
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			raw = f
		}
	}
	if raw == nil {
		return "", fmt.Errorf("chart %s has no %s", chartDir, chartutil.ValuesfileName)
	}
	edited, err := setImageValues(raw.Data, rel)
	if err != nil {
		return "", fmt.Errorf("%s/%s: %w", chartDir, chartutil.ValuesfileName, err)
	}
	raw.Data = edited
	if ch.Values, err = chartutil.ReadValues(edited); err != nil {
		return "", err
	}
	return chartutil.Save(ch, outDir)
}

// setImageValues sets image.repository, image.tag (empty: the chart's appVersion and the line)
// and image.digests.<line> for every line in a values.yaml document, keeping its comments and
// order. image.digests must list exactly the release's lines: a line the chart could pick
// without an image in the release would run a tag that was never pushed.
func setImageValues(data []byte, rel Release) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a YAML mapping")
	}
	image := mapValue(doc.Content[0], "image")
	if image == nil || image.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("no image mapping")
	}
	for key, value := range map[string]string{"repository": rel.Repository, "tag": ""} {
		v := mapValue(image, key)
		if v == nil {
			return nil, fmt.Errorf("image.%s is not in the file; the chart must declare it", key)
		}
		setString(v, value)
	}
	digests := mapValue(image, "digests")
	if digests == nil || digests.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("image.digests is not a mapping of release line to digest; the chart must declare one entry per line")
	}
	var chartLines []string
	for i := 0; i+1 < len(digests.Content); i += 2 {
		chartLines = append(chartLines, digests.Content[i].Value)
	}
	sortLines(chartLines)
	if got := rel.Lines(); !slices.Equal(chartLines, got) {
		return nil, fmt.Errorf("image.digests lists the release lines %v, the release has images of %v: every line the chart serves needs its image, and only those (make release builds every line)", chartLines, got)
	}
	for i := 0; i+1 < len(digests.Content); i += 2 {
		setString(digests.Content[i+1], rel.Digests[digests.Content[i].Value])
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func setString(v *yaml.Node, value string) {
	v.Kind, v.Tag, v.Value, v.Style = yaml.ScalarNode, "!!str", value, 0
	if value == "" {
		v.Style = yaml.DoubleQuotedStyle // "" rather than a bare empty value
	}
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// LintChart runs Helm's chart linter (helm lint --strict, as the Helm SDK's pkg/lint runs it:
// Chart.yaml, values against the schema, templates rendered against kubeVersion) and returns
// one error per finding at warning level or above, and the informational ones separately.
func LintChart(chartPath, namespace, kubeVersion string, values map[string]any) (problems, info []string, err error) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, nil, err
	}
	linter := lint.AllWithKubeVersion(chartPath, values, namespace, kv)
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			problems = append(problems, m.Error())
		} else {
			info = append(info, m.Error())
		}
	}
	return problems, info, nil
}

// Bundle is one install YAML: the kustomize directories (relative to the repository) it renders.
// A bundle whose workloads run pool-scheduler's image (PerLine) is released once per release
// line, as FileName(line), each running that line's image; so is one whose objects' API
// versions differ between the lines' Kubernetes minors (APIPerLine); the others once, as File.
type Bundle struct {
	File       string
	Dirs       []string
	PerLine    bool
	APIPerLine bool
	// FromLineOverlay: each line's file renders that line's overlay (LineOverlay), whose
	// resources are Dirs and whose patches are the line's own (the 1.36 line's scheduler role).
	FromLineOverlay bool
}

// DirsFor are the directories the bundle renders for a release line.
func (b Bundle) DirsFor(line string) []string {
	if b.FromLineOverlay {
		return []string{LineOverlay(line)}
	}
	return b.Dirs
}

// FileName is the bundle's file for a release line: install-domain-labeler.yaml of line 1.36
// is install-domain-labeler-k8s1.36.yaml. A bundle that is the same for every line has one file.
func (b Bundle) FileName(line string) string {
	if !b.PerLine && !b.APIPerLine {
		return b.File
	}
	return strings.TrimSuffix(b.File, ".yaml") + "-k8s" + line + ".yaml"
}

// mutatingAdmissionPolicyGA is the first Kubernetes minor that serves MutatingAdmissionPolicy
// as admissionregistration.k8s.io/v1 by default; v1beta1 (the manifests') is off by default
// there. The two versions' specs are identical (k8s.io/api v0.36.3 admissionregistration).
const mutatingAdmissionPolicyGA = 36

// lineAPIVersions rewrites a rendered bundle's objects to the API versions a line's clusters
// serve by default: MutatingAdmissionPolicy and its bindings in v1 from 1.36, as the chart
// renders them where the cluster serves v1.
func lineAPIVersions(yamlStream []byte, line string) ([]byte, error) {
	minor, err := strconv.Atoi(strings.TrimPrefix(line, "1."))
	if err != nil || minor < mutatingAdmissionPolicyGA {
		return yamlStream, err
	}
	var out bytes.Buffer
	dec := yaml.NewDecoder(bytes.NewReader(yamlStream))
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
			obj := doc.Content[0]
			kind, api := mapValue(obj, "kind"), mapValue(obj, "apiVersion")
			if kind != nil && api != nil && api.Value == "admissionregistration.k8s.io/v1beta1" &&
				(kind.Value == "MutatingAdmissionPolicy" || kind.Value == "MutatingAdmissionPolicyBinding") {
				api.Value = "admissionregistration.k8s.io/v1"
			}
		}
		if err := enc.Encode(&doc); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Bundles are the install YAMLs of a release: the scheduler (with the CRD, namespace, RBAC and
// admission policies), its admission webhook (namespaces opt in by label), the labeler's
// controller, the hand-off controller and the spread keeper, as the chart installs by default; the Azure domain labeler on its own, as the
// chart's labeler.domain.enabled adds it; the MutatingAdmissionPolicy way in instead of the
// webhook (docs/autoscaling.md); the optional system-pods admission policy (docs/security.md),
// off by default in the chart.
var Bundles = []Bundle{
	// manifests/admission/webhook includes manifests/scheduler: the webhook mounts its ConfigMap.
	{File: "install.yaml", Dirs: []string{"manifests/admission/webhook", "manifests/labeler/controller", "manifests/handoff", "manifests/spread"}, PerLine: true, FromLineOverlay: true},
	// MutatingAdmissionPolicy: v1beta1 for 1.34 and 1.35 (with the API enabled), v1 from 1.36.
	{File: "install-admission-policy.yaml", Dirs: []string{"manifests/admission/policy"}, APIPerLine: true},
	{File: "install-domain-labeler.yaml", Dirs: []string{"manifests/labeler/domain"}, PerLine: true},
	{File: "install-system-pod-policy.yaml", Dirs: []string{"manifests/policies/system-pods"}},
}

// LineOverlay is the kustomize overlay (relative to the repository) that installs from a checkout
// what install-k8s<line>.yaml holds, Bundles[0] with the line's image by tag: one per release
// line, so `kubectl apply -k` gets an admission path and the image of the cluster's line.
func LineOverlay(line string) string { return "manifests/overlays/k8s-" + line }

// LineDomainLabelerOverlay is the overlay that installs from a checkout what
// install-domain-labeler-k8s<line>.yaml holds: the Azure domain labeler at the line's image (the
// chart installs it by default; kubectl apply -k it beside LineOverlay on AKS).
func LineDomainLabelerOverlay(line string) string { return LineOverlay(line) + "/domain-labeler" }

// RenderRelease renders every bundle for the release: the per-line bundles once per line with
// that line's image, the others once. It returns the files by name. A bundle that runs an image
// without being per-line, or per-line without running one, is refused: its file name would
// not say which clusters it is for.
func RenderRelease(root string, rel Release) (map[string][]byte, error) {
	if err := rel.validate(); err != nil {
		return nil, err
	}
	lines := rel.Lines()
	files := map[string][]byte{}
	for _, b := range Bundles {
		render := lines
		if !b.PerLine && !b.APIPerLine {
			render = lines[:1] // no image or API version to set: the same YAML for every line
		}
		for _, line := range render {
			data, err := RenderBundle(root, b.DirsFor(line), rel.Image(line))
			if err != nil {
				return nil, err
			}
			if data, err = lineAPIVersions(data, line); err != nil {
				return nil, fmt.Errorf("%s: %w", b.FileName(line), err)
			}
			if runs := bundleRunsImage(data); runs != b.PerLine {
				return nil, fmt.Errorf("%s (%s): runs the image: %v, but PerLine is %v; a bundle with pool-scheduler's workloads is released per line", b.File, strings.Join(b.Dirs, " + "), runs, b.PerLine)
			}
			files[b.FileName(line)] = data
		}
	}
	return files, nil
}

// bundleRunsImage reports whether a rendered bundle has a container (checkImages has made sure
// they all run the release's image).
func bundleRunsImage(yamlStream []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(yamlStream))
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return false
		}
		if len(ContainerImages(obj)) > 0 {
			return true
		}
	}
}

// RenderBundle renders dirs of the repository at root with kustomize (sigs.k8s.io/kustomize/api,
// the library `kubectl kustomize` runs) into one YAML stream, every container image of
// img.Repository set to img.Ref(). The repository's files are copied into an in-memory file
// system, so nothing is written next to them.
func RenderBundle(root string, dirs []string, img Image) ([]byte, error) {
	if err := img.validate(); err != nil {
		return nil, err
	}
	mem := filesys.MakeFsInMemory()
	if err := copyTree(mem, root, "manifests"); err != nil {
		return nil, err
	}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  prefixed("../", dirs),
		"images":     []map[string]string{{"name": img.Repository, "newTag": img.Tag(), "digest": img.Digest}},
	}
	data, err := sigsyaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := mem.WriteFile("/release/kustomization.yaml", data); err != nil {
		return nil, err
	}
	opts := krusty.MakeDefaultOptions()
	// Namespaces and CRDs first, as `kubectl kustomize` orders them, so `kubectl apply -f` works
	// in one pass.
	opts.Reorder = krusty.ReorderOptionLegacy
	resmap, err := krusty.MakeKustomizer(opts).Run(mem, "/release")
	if err != nil {
		return nil, fmt.Errorf("kustomize %v: %w", dirs, err)
	}
	out, err := resmap.AsYaml()
	if err != nil {
		return nil, err
	}
	if err := checkImages(out, img); err != nil {
		return nil, fmt.Errorf("kustomize %v: %w", dirs, err)
	}
	return out, nil
}

// checkImages refuses a bundle with a container that does not run img.Ref(): a manifest that
// names the image differently would silently keep its own tag.
func checkImages(yamlStream []byte, img Image) error {
	dec := yaml.NewDecoder(bytes.NewReader(yamlStream))
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		for _, image := range ContainerImages(obj) {
			if image != img.Ref() {
				return fmt.Errorf("%s %v runs image %q, not the release's %s", obj["kind"], nested(obj, "metadata", "name"), image, img.Ref())
			}
		}
	}
}

// ContainerImages lists the images of a workload object's containers and init containers.
func ContainerImages(obj map[string]any) []string {
	spec := nested(obj, "spec", "template", "spec")
	if spec == nil {
		spec = nested(obj, "spec")
	}
	podSpec, _ := spec.(map[string]any)
	var out []string
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := podSpec[key].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				out = append(out, fmt.Sprint(m["image"]))
			}
		}
	}
	return out
}

func nested(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func prefixed(prefix string, items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = prefix + s
	}
	return out
}

func copyTree(mem filesys.FileSystem, root, dir string) error {
	return filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+filepath.ToSlash(rel), data)
	})
}

// PluginArchive packages a kubectl-pool binary as krew expects: a .tar.gz holding the binary and
// the project's LICENSE (krew's submission checklist: the license in the archive, extracted on
// install; manifests/krew/pool.yaml.tmpl's files). Entries carry the given time, so the same input gives
// the same archive.
func PluginArchive(binary, license, out string, modTime time.Time) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range []struct {
		name, path string
		mode       int64
	}{{PluginBinary, binary, 0o755}, {PluginLicense, license, 0o644}} {
		data, err := os.ReadFile(e.path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(data)), ModTime: modTime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// PluginLicense is the license file in the plugin's archive.
const PluginLicense = "LICENSE"

// PluginBinary is the plugin's executable: kubectl runs `kubectl pool ...` as kubectl-pool.
const PluginBinary = "kubectl-pool"

// PluginPlatform is one archive of the plugin, as the krew manifest lists it.
type PluginPlatform struct {
	OS, Arch, URI, SHA256 string
}

// KrewManifest fills the krew plugin manifest template (manifests/krew/pool.yaml.tmpl) for a release.
func KrewManifest(templateFile, version string, platforms []PluginPlatform) ([]byte, error) {
	if !versionRE.MatchString(version) {
		return nil, fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH", version)
	}
	if len(platforms) == 0 {
		return nil, fmt.Errorf("no plugin platform")
	}
	tmpl, err := template.New(filepath.Base(templateFile)).Option("missingkey=error").ParseFiles(templateFile)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]any{"Version": version, "Platforms": platforms, "Bin": PluginBinary}); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// FileSHA256 is a file's SHA-256 in hex.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteChecksums writes SHA256SUMS in dir for every regular file in it (not SHA256SUMS itself),
// in the format `sha256sum -c` reads.
func WriteChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != "SHA256SUMS" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		sum, err := FileSHA256(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// TarDir writes dir's files into a tar archive (an OCI image layout as one file: `docker load`,
// `skopeo copy oci-archive:` and `crane push` read it), in name order with fixed times.
func TarDir(dir, out string, modTime time.Time) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: st.Size(), ModTime: modTime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// PushChart pushes a packaged chart (.tgz) to an OCI registry as `helm push <tgz> oci://<repo>`
// does: <repo>/<chart name>:<chart version>, the chart's layer the .tgz as is (so its digest is
// the sha256 the release's signed SHA256SUMS lists for it). Credentials: Helm's registry config
// (helm registry login), then Docker's. plainHTTP is for a registry without TLS (tests). It
// returns the pushed reference with the manifest's digest.
func PushChart(tgz, repo string, plainHTTP bool) (string, error) {
	data, err := os.ReadFile(tgz)
	if err != nil {
		return "", err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("%s: %w", tgz, err)
	}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard)}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return "", err
	}
	ref := strings.TrimSuffix(strings.TrimPrefix(repo, "oci://"), "/") + "/" + ch.Metadata.Name + ":" + ch.Metadata.Version
	res, err := client.Push(data, ref, registry.PushOptStrictMode(true))
	if err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", tgz, ref, err)
	}
	return ref + "@" + res.Manifest.Digest, nil
}
