// Package release makes pool-scheduler's release artifacts from the repository's own files:
// the Helm chart packaged for one release with its image pinned by tag and digest, the
// kustomize manifests rendered to install YAML with the same image, the kubectl plugin's
// archives and krew manifest, and SHA256SUMS. hack/release runs it (make release).
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
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// versionRE is a release version: v, then SemVer 2 (pre-releases allowed, as Helm's chart
// version requires SemVer).
var versionRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Image is the released image: repository, tag (the release) and the index digest.
type Image struct {
	Repository, Tag, Digest string
}

// Ref is repository:tag@digest, what the chart and the install YAML run.
func (i Image) Ref() string { return i.Repository + ":" + i.Tag + "@" + i.Digest }

func (i Image) validate() error {
	if !versionRE.MatchString(i.Tag) {
		return fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v0.1.0", i.Tag)
	}
	if !digestRE.MatchString(i.Digest) {
		return fmt.Errorf("image digest %q: want sha256:<64 hex digits>", i.Digest)
	}
	if i.Repository == "" || strings.ContainsAny(i.Repository, ":@ ") {
		return fmt.Errorf("image repository %q: want a name without tag or digest, e.g. ghcr.io/pool-scheduler/pool-scheduler", i.Repository)
	}
	return nil
}

// PackageChart packages the chart in chartDir into outDir for img's release: version = the
// release without its "v" (Helm chart versions are bare SemVer), appVersion = the release, and
// values.yaml's image.repository, image.tag and image.digest set (comments kept), so the chart
// installs exactly the released image. It returns the .tgz path.
func PackageChart(chartDir, outDir string, img Image) (string, error) {
	if err := img.validate(); err != nil {
		return "", err
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	ch.Metadata.Version = strings.TrimPrefix(img.Tag, "v")
	ch.Metadata.AppVersion = img.Tag
	var raw *chart.File
	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			raw = f
		}
	}
	if raw == nil {
		return "", fmt.Errorf("chart %s has no %s", chartDir, chartutil.ValuesfileName)
	}
	edited, err := setImageValues(raw.Data, img)
	if err != nil {
		return "", fmt.Errorf("%s/%s: %w", chartDir, chartutil.ValuesfileName, err)
	}
	raw.Data = edited
	if ch.Values, err = chartutil.ReadValues(edited); err != nil {
		return "", err
	}
	return chartutil.Save(ch, outDir)
}

// setImageValues sets image.{repository,tag,digest} in a values.yaml document, keeping its
// comments and order.
func setImageValues(data []byte, img Image) ([]byte, error) {
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
	for key, value := range map[string]string{"repository": img.Repository, "tag": img.Tag, "digest": img.Digest} {
		v := mapValue(image, key)
		if v == nil {
			return nil, fmt.Errorf("image.%s is not in the file; the chart must declare it", key)
		}
		v.Kind, v.Tag, v.Value, v.Style = yaml.ScalarNode, "!!str", value, 0
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
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
type Bundle struct {
	File string
	Dirs []string
}

// Bundles are the install YAMLs of a release: the scheduler (with the CRD, namespace, RBAC and
// admission policies), its admission webhook (namespaces opt in by label) and the labeler's
// controller, as the chart installs by default; the Azure domain labeler on its own, as the
// chart's labeler.domain.enabled adds it; the MutatingAdmissionPolicy way in instead of the
// webhook (docs/autoscaling.md); the optional system-pods admission policy (docs/security.md),
// off by default in the chart.
var Bundles = []Bundle{
	// manifests/admission/webhook includes manifests/scheduler: the webhook mounts its ConfigMap.
	{File: "install.yaml", Dirs: []string{"manifests/admission/webhook", "manifests/labeler/controller"}},
	{File: "install-admission-policy.yaml", Dirs: []string{"manifests/admission/policy"}},
	{File: "install-domain-labeler.yaml", Dirs: []string{"manifests/labeler/domain"}},
	{File: "install-system-pod-policy.yaml", Dirs: []string{"manifests/policies/system-pods"}},
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
		"images":     []map[string]string{{"name": img.Repository, "newTag": img.Tag, "digest": img.Digest}},
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
// install; plugins/pool.yaml's files). Entries carry the given time, so the same input gives
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

// KrewManifest fills the krew plugin manifest template (plugins/pool.yaml) for a release.
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
