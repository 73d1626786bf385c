package release

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// renderDir builds a kustomization directory of the repository as `kubectl apply -k` does (the
// legacy order: namespaces and CRDs first).
func renderDir(t *testing.T, dir string) []byte {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resmap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resmap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLineOverlays: every release line has its overlay (LineOverlay) and its domain labeler's
// (LineDomainLabelerOverlay), and only the lines do; each
// runs the line's image of the chart's appVersion in every pool-scheduler container, and, given a
// digest by an overlay of one's own (an images: entry, as the README's registry recipe does), it
// is exactly the release's install-k8s<line>.yaml: the admission webhook included, so the
// README's namespace label opts pods in.
func TestLineOverlays(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	app := ch.Metadata.AppVersion
	const digest = "sha256:" + "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	lines := map[string]bool{}
	for _, l := range releaselines.All(t) {
		lines[l.Line] = true
		for _, o := range []struct {
			dir     string
			bundle  Bundle
			webhook bool
		}{
			{dir: LineOverlay(l.Line), bundle: Bundles[0], webhook: true},
			{dir: LineDomainLabelerOverlay(l.Line), bundle: domainLabelerBundle(t)},
		} {
			t.Run(o.dir, func(t *testing.T) {
				dir := filepath.Join(repoRoot(), o.dir)
				want := "ghcr.io/pool-scheduler/pool-scheduler:" + LineTag(app, l.Line)
				var containers int
				var kinds []string
				for _, obj := range decodeAll(t, renderDir(t, dir)) {
					kinds = append(kinds, fmt.Sprint(obj["kind"]))
					for _, img := range ContainerImages(obj) {
						containers++
						if img != want {
							t.Errorf("%s %v: image %s, want %s", obj["kind"], nested(obj, "metadata", "name"), img, want)
						}
					}
				}
				if containers == 0 {
					t.Fatalf("%s runs no container", dir)
				}
				if o.webhook && !strings.Contains(strings.Join(kinds, " "), "MutatingWebhookConfiguration") {
					t.Errorf("%s has no admission path (no MutatingWebhookConfiguration): labelling a namespace opts nothing in", dir)
				}

				// Rendered from the overlay itself (FromLineOverlay), the bundle's contents are
				// the overlay's resources: they must be the bundle's directories.
				if o.bundle.FromLineOverlay {
					data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
					if err != nil {
						t.Fatal(err)
					}
					var k struct {
						Resources []string `json:"resources"`
					}
					if err := sigsyaml.Unmarshal(data, &k); err != nil {
						t.Fatal(err)
					}
					var want []string
					for _, d := range o.bundle.Dirs {
						want = append(want, "../../"+strings.TrimPrefix(d, "manifests/"))
					}
					if diff := cmp.Diff(want, k.Resources); diff != "" {
						t.Errorf("%s: resources differ from the bundle %s's directories (-bundle +overlay):\n%s", dir, o.bundle.File, diff)
					}
				}

				// Pinned to a digest by an overlay of one's own, it is the release's install YAML.
				own := t.TempDir()
				base, err := filepath.Rel(own, dir)
				if err != nil {
					t.Fatal(err)
				}
				k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n- name: ghcr.io/pool-scheduler/pool-scheduler\n  newTag: %s\n  digest: %s\n", base, LineTag(app, l.Line), digest)
				if err := os.WriteFile(filepath.Join(own, "kustomization.yaml"), []byte(k), 0o644); err != nil {
					t.Fatal(err)
				}
				got := renderDir(t, own)
				release, err := RenderBundle(repoRoot(), o.bundle.DirsFor(l.Line), Image{Repository: "ghcr.io/pool-scheduler/pool-scheduler", Version: app, Line: l.Line, Digest: digest})
				if err != nil {
					t.Fatal(err)
				}
				if release, err = lineAPIVersions(release, l.Line); err != nil {
					t.Fatal(err)
				}
				// Compared as objects: the release re-encodes the YAML of some lines (lineAPIVersions).
				if diff := cmp.Diff(decodeAll(t, release), decodeAll(t, got)); diff != "" {
					t.Errorf("%s with a digest differs from %s (-release +overlay):\n%s", dir, o.bundle.FileName(l.Line), diff)
				}
			})
		}
	}
	dirs, err := filepath.Glob(filepath.Join(repoRoot(), "manifests", "overlays", "k8s-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if line := strings.TrimPrefix(filepath.Base(d), "k8s-"); !lines[line] {
			t.Errorf("%s: %s is not a release line (make lines)", d, line)
		}
	}
}

// domainLabelerBundle is the release's install-domain-labeler bundle.
func domainLabelerBundle(t *testing.T) Bundle {
	t.Helper()
	for _, b := range Bundles {
		if b.File == "install-domain-labeler.yaml" {
			return b
		}
	}
	t.Fatal("no install-domain-labeler.yaml in Bundles")
	return Bundle{}
}
