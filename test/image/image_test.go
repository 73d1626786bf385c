// Package image checks the OCI image `make image` writes (hack/release, internal/ociimage) as a
// user of it would: its config, the binaries it runs from its own layers, its SBOMs, a push to
// and pull from a registry (go-containerregistry's, in process on loopback), and the README's
// install recipe with it (TestRegistryRecipe: kube-apiserver and etcd from bin/).
package image

import (
	"archive/tar"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// repoRoot is the repository checkout.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// layoutDir is the layout under test: $POOL_SCHEDULER_IMAGE_LAYOUT (make image-test sets it to
// a host-platform layout built from bin/), else make image's layout of the default release line,
// _output/image/k8s-<line>.
func layoutDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("POOL_SCHEDULER_IMAGE_LAYOUT")
	if dir == "" {
		for _, l := range releaselines.All(t) {
			if l.Default {
				dir = filepath.Join(repoRoot(), "_output", "image", "k8s-"+l.Line)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		t.Fatalf("no OCI image layout at %s (run `make image` or `make image-test`): %v", dir, err)
	}
	return dir
}

func readLayout(t *testing.T) *ociimage.Layout {
	t.Helper()
	l, err := ociimage.ReadLayout(layoutDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// platformImages returns the index's images by "os/arch".
func platformImages(t *testing.T, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.OS+"/"+d.Platform.Architecture] = img
	}
	if len(out) == 0 {
		t.Fatal("the image index lists no image")
	}
	return out
}

// extract writes img's flattened filesystem under dir and returns the tar headers by path.
func extract(t *testing.T, img v1.Image, dir string) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		clean := path.Clean("/" + h.Name)
		files[clean] = h
		target := filepath.Join(dir, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: tar entry type %q; the image holds only directories and regular files", clean, h.Typeflag)
		}
	}
	return files
}

// TestImageConfig checks what a kubelet reads before it starts the container: every platform
// runs the scheduler as the numeric nonroot user through an exec-form entrypoint that exists in
// the image as a static binary of that architecture, with no shell anywhere, and carries the
// OCI labels; the labels and the index's annotations agree, and the layout is tagged with the
// version and the release line, <version>-k8s<line>.
func TestImageConfig(t *testing.T) {
	l := readLayout(t)
	im, err := l.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := im.Annotations
	for _, key := range []string{ociimage.AnnotationVersion, ociimage.AnnotationRevision, ociimage.AnnotationSource, ociimage.AnnotationCreated} {
		if want[key] == "" {
			t.Errorf("the image index has no %s annotation", key)
		}
	}
	if _, ok := tagLine(l.Tag, want[ociimage.AnnotationVersion]); !ok {
		t.Errorf("layout tag %q, want the version %q and the release line, <version>-k8s1.<minor>", l.Tag, want[ociimage.AnnotationVersion])
	}
	for plat, img := range platformImages(t, l.Index) {
		t.Run(plat, func(t *testing.T) {
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := cf.OS + "/" + cf.Architecture; got != plat {
				t.Errorf("config platform %s, index says %s", got, plat)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532 (numeric, so runAsNonRoot can check it)", cf.Config.User)
			}
			if diff := cmp.Diff([]string{"/usr/local/bin/pool-scheduler"}, cf.Config.Entrypoint); diff != "" {
				t.Errorf("entrypoint (-want +got):\n%s", diff)
			}
			if len(cf.Config.Cmd) != 0 || len(cf.Config.Shell) != 0 {
				t.Errorf("cmd %q, shell %q: nothing may need a shell", cf.Config.Cmd, cf.Config.Shell)
			}
			if diff := cmp.Diff(want, cf.Config.Labels); diff != "" {
				t.Errorf("config labels differ from the index annotations (-index +labels):\n%s", diff)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, m.Annotations); diff != "" {
				t.Errorf("manifest annotations differ from the index's (-index +manifest):\n%s", diff)
			}

			root := t.TempDir()
			files := extract(t, img, root)
			for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/busybox", "/usr/bin/sh"} {
				if files[sh] != nil {
					t.Errorf("the image contains %s; it must not need or ship a shell", sh)
				}
			}
			for _, bin := range []string{"pool-scheduler", "pool-labeler"} {
				p := "/usr/local/bin/" + bin
				h := files[p]
				if h == nil {
					t.Errorf("the image has no %s", p)
					continue
				}
				if h.Mode&0o005 != 0o005 {
					t.Errorf("%s mode %o: user 65532 cannot execute it", p, h.Mode)
				}
				f, err := elf.Open(filepath.Join(root, p))
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				for _, prog := range f.Progs {
					if prog.Type == elf.PT_INTERP {
						t.Errorf("%s is dynamically linked; the image has no loader or libc", p)
					}
				}
				wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[cf.Architecture]
				if f.Machine != wantMachine {
					t.Errorf("%s is built for %s, the image is %s", p, f.Machine, plat)
				}
				f.Close()
			}
			if h := files["/tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
				t.Errorf("/tmp missing or not world-writable with the sticky bit: %+v", h)
			}
			if h := files["/home/nonroot"]; h == nil || h.Uid != 65532 {
				t.Errorf("/home/nonroot missing or not owned by 65532: %+v", h)
			}
		})
	}
}

// TestImageRunsItsBinaries runs the host platform's binaries as extracted from the image's
// layers: both start, and report the version and commit the image's labels name and the release
// line its tag names.
func TestImageRunsItsBinaries(t *testing.T) {
	l := readLayout(t)
	host := "linux/" + runtime.GOARCH
	img, ok := platformImages(t, l.Index)[host]
	if !ok {
		t.Fatalf("the image has no %s image to run here", host)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	version, revision := cf.Config.Labels[ociimage.AnnotationVersion], cf.Config.Labels[ociimage.AnnotationRevision]
	head, err := exec.Command("git", "-C", repoRoot(), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	if got := strings.TrimSpace(string(head)); revision != got {
		t.Errorf("revision label %q, but the checkout is at %s (rebuild the image)", revision, got)
	}
	root := t.TempDir()
	extract(t, img, root)
	for _, bin := range []string{"pool-scheduler", "pool-labeler"} {
		out, err := exec.Command(filepath.Join(root, "usr/local/bin", bin), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, out)
		}
		line := strings.SplitN(string(out), "\n", 2)[0]
		m := versionLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s --version printed %q, not pool-scheduler's version line", bin, out)
		}
		gotVersion, gotCommit := m[1], m[2]
		if gotVersion != version {
			t.Errorf("%s --version says %s, the image label %s", bin, gotVersion, version)
		}
		if len(gotCommit) < 7 || !strings.HasPrefix(revision, gotCommit) {
			t.Errorf("%s --version says commit %q, the image label revision %s", bin, gotCommit, revision)
		}
		// The binaries are the release line's the tag names (its second line:
		// "Kubernetes v1.36.3 (line 1.36, scheduler-plugins none)").
		tagged, ok := tagLine(l.Tag, version)
		if got := lineOfVersion.FindStringSubmatch(string(out)); !ok || got == nil || got[1] != tagged {
			t.Errorf("%s --version printed %q; the image is tagged %s, for line %q", bin, out, l.Tag, tagged)
		}
	}
}

// TestImageSBOM checks each platform's SBOM against the binaries in that platform's layers: it
// is attached to that image, lists each binary with its SHA-256, and every Go module the
// binary's build info says it links, at the linked version.
func TestImageSBOM(t *testing.T) {
	l := readLayout(t)
	for plat, img := range platformImages(t, l.Index) {
		t.Run(plat, func(t *testing.T) {
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			art, ok := l.SBOMs[d]
			if !ok {
				t.Fatalf("no SBOM refers to the %s image %s", plat, d)
			}
			doc := sbomDoc(t, art)
			root := t.TempDir()
			extract(t, img, root)
			packages := map[string]ociimage.SPDXPackage{}
			for _, p := range doc.Packages {
				packages[p.SPDXID] = p
			}
			depends := map[string][]string{}
			for _, r := range doc.Relationships {
				if r.RelationshipType == "DEPENDS_ON" {
					p := packages[r.RelatedSPDXElement]
					depends[r.SPDXElementID] = append(depends[r.SPDXElementID], p.Name+"@"+p.VersionInfo)
				}
			}
			for _, bin := range []string{"pool-scheduler", "pool-labeler"} {
				file := filepath.Join(root, "usr/local/bin", bin)
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(data)
				var id string
				for _, p := range doc.Packages {
					if p.Name == bin && p.PrimaryPackagePurpose == "APPLICATION" {
						id = p.SPDXID
						if len(p.Checksums) != 1 || p.Checksums[0].ChecksumValue != hex.EncodeToString(sum[:]) {
							t.Errorf("%s: SBOM checksum %v, the image's binary has SHA256 %x", bin, p.Checksums, sum)
						}
					}
				}
				if id == "" {
					t.Fatalf("the SBOM has no package for %s", bin)
				}
				info, err := buildinfo.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				want := []string{"stdlib@" + info.GoVersion}
				for _, dep := range info.Deps {
					p, v := ociimage.ModuleVersion(dep)
					want = append(want, p+"@"+v)
				}
				got := depends[id]
				sort.Strings(want)
				sort.Strings(got)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: SBOM dependencies differ from the binary's build info (-buildinfo +sbom):\n%s", bin, diff)
				}
				if len(want) < 30 {
					t.Errorf("%s links only %d modules by its build info; expected client-go's dozens at least", bin, len(want))
				}
			}
		})
	}
}

func sbomDoc(t *testing.T, art v1.Image) *ociimage.SPDXDocument {
	t.Helper()
	raw, err := art.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ArtifactType string `json:"artifactType"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != "application/spdx+json" {
		t.Errorf("SBOM artifactType %q", m.ArtifactType)
	}
	layers, err := art.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("SBOM artifact layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	doc := &ociimage.SPDXDocument{}
	if err := json.NewDecoder(rc).Decode(doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" {
		t.Errorf("SPDX header: %s %s %s", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
	}
	return doc
}

// TestImagePushPull pushes the layout to an in-process registry, with and without the OCI 1.1
// referrers API, pulls the image back by the layout's digest and by tag, and finds each
// platform's SBOM as a referrer of that platform's image.
func TestImagePushPull(t *testing.T) {
	l := readLayout(t)
	want, err := l.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, referrersAPI := range []bool{true, false} {
		name := map[bool]string{true: "referrers API", false: "referrers tag schema"}[referrersAPI]
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrersAPI), registry.Logger(log.New(io.Discard, "", 0))))
			defer srv.Close()
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			repo := u.Host + "/pool-scheduler/pool-scheduler"
			pushed, err := ociimage.Push(l, repo)
			if err != nil {
				t.Fatal(err)
			}
			if pushed.DigestStr() != want.String() {
				t.Errorf("pushed %s, the layout's index is %s", pushed, want)
			}
			ref, err := nameDigest(repo, want.String())
			if err != nil {
				t.Fatal(err)
			}
			idx, err := remote.Index(ref)
			if err != nil {
				t.Fatalf("pulling %s: %v", ref, err)
			}
			if got, _ := idx.Digest(); got != want {
				t.Errorf("pulled %s by digest, got %s", want, got)
			}
			tagged, err := remote.Head(mustTag(t, repo+":"+l.Tag))
			if err != nil {
				t.Fatal(err)
			}
			if tagged.Digest != want {
				t.Errorf("tag %s points at %s, want %s", l.Tag, tagged.Digest, want)
			}
			local := platformImages(t, l.Index)
			for plat, img := range platformImages(t, idx) {
				d, _ := img.Digest()
				ld, _ := local[plat].Digest()
				if d != ld {
					t.Errorf("%s: pulled image %s, layout has %s", plat, d, ld)
				}
				layers, err := img.Layers()
				if err != nil {
					t.Fatal(err)
				}
				for _, layer := range layers {
					rc, err := layer.Compressed()
					if err != nil {
						t.Fatal(err)
					}
					h := sha256.New()
					if _, err := io.Copy(h, rc); err != nil {
						t.Fatal(err)
					}
					rc.Close()
					ldig, _ := layer.Digest()
					if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != ldig.String() {
						t.Errorf("%s: layer %s pulled with content %s", plat, ldig, got)
					}
				}
				subject, err := nameDigest(repo, d.String())
				if err != nil {
					t.Fatal(err)
				}
				refs, err := remote.Referrers(subject)
				if err != nil {
					t.Fatalf("%s: referrers: %v", plat, err)
				}
				rm, err := refs.IndexManifest()
				if err != nil {
					t.Fatal(err)
				}
				sbomDigest, _ := l.SBOMs[d].Digest()
				var found bool
				for _, r := range rm.Manifests {
					if r.Digest != sbomDigest {
						continue
					}
					found = true
					sref, _ := nameDigest(repo, r.Digest.String())
					art, err := remote.Image(sref)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := sbomDoc(t, art), sbomDoc(t, l.SBOMs[d]); !cmp.Equal(got, want) {
						t.Errorf("%s: pulled SBOM differs from the layout's", plat)
					}
				}
				if !found {
					t.Errorf("%s: the registry lists %d referrers of %s, not the SBOM %s", plat, len(rm.Manifests), d, sbomDigest)
				}
			}
		})
	}
}

func nameDigest(repo, digest string) (name.Digest, error) { return name.NewDigest(repo + "@" + digest) }

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// tagLine returns the release line of an image tag <version>-k8s<line> (e.g. v0.9.0-k8s1.36):
// one repository holds an image per line (docs/compatibility.md).
func tagLine(tag, version string) (string, bool) {
	line, ok := strings.CutPrefix(tag, version+"-k8s")
	return line, ok && regexp.MustCompile(`^1\.\d+$`).MatchString(line)
}

// lineOfVersion is the release line in version.Line(), --version's second line.
var lineOfVersion = regexp.MustCompile(`(?m)^Kubernetes v\S+ \(line (1\.\d+),`)

// versionLine is version.String(): "pool-scheduler <version> (commit <short commit>, <go version>)".
var versionLine = regexp.MustCompile(`^pool-scheduler (\S+) \(commit ([0-9a-f]+), go`)
