package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	imageTarPrefix = "pool-scheduler-image-"
	imageTarSuffix = ".oci.tar"
	// annotationRefName tags the image index in a layout's index.json (make image).
	annotationRefName  = "org.opencontainers.image.ref.name"
	annotationCreated  = "org.opencontainers.image.created"
	annotationTitle    = "org.opencontainers.image.title"
	annotationContent  = "dev.sigstore.bundle.content"
	annotationPredType = "dev.sigstore.bundle.predicateType"
	emptyConfigType    = "application/vnd.oci.empty.v1+json"
)

// release is a release directory as make release writes it: the files SHA256SUMS lists, each
// checked against it, and the images its OCI archives hold.
type release struct {
	Dir      string
	SumsData []byte
	// Sums maps a file name to its hex SHA-256, as SHA256SUMS lists it.
	Sums   map[string]string
	Images []releaseImage
}

// releaseImage is a release line's image: its tag, image index digest and the archive holding it.
type releaseImage struct {
	Tag    string
	Digest v1.Hash
	File   string
}

func (i releaseImage) subject(repo string) *intoto.ResourceDescriptor {
	return &intoto.ResourceDescriptor{Name: repo + ":" + i.Tag, Digest: map[string]string{i.Digest.Algorithm: i.Digest.Hex}}
}

// Names lists the files of SHA256SUMS in order.
func (r *release) Names() []string { return slices.Sorted(maps.Keys(r.Sums)) }

// readRelease reads dir's SHA256SUMS and checks it: every file it lists is there with that
// digest, and every file but SHA256SUMS and the .sigstore.json bundles is listed.
func readRelease(dir string) (*release, error) {
	data, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	r := &release{Dir: dir, SumsData: data, Sums: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || file == "" || strings.ContainsAny(file, `/\`) {
			return nil, fmt.Errorf("%s: malformed line %q", SumsFile, sc.Text())
		}
		if _, dup := r.Sums[file]; dup {
			return nil, fmt.Errorf("%s lists %s twice", SumsFile, file)
		}
		r.Sums[file] = sum
	}
	if len(r.Sums) == 0 {
		return nil, fmt.Errorf("%s lists no file", SumsFile)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		if n == SumsFile || strings.HasSuffix(n, bundleSuffix) {
			continue
		}
		if _, ok := r.Sums[n]; !ok {
			return nil, fmt.Errorf("%s is not listed in %s (added after the release was made?)", n, SumsFile)
		}
	}
	for _, n := range r.Names() {
		got, err := fileSHA256(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("%s is listed in %s: %w", n, SumsFile, err)
		}
		if got != r.Sums[n] {
			return nil, fmt.Errorf("%s: sha256 %s, but %s lists %s (the file changed)", n, got, SumsFile, r.Sums[n])
		}
		if strings.HasPrefix(n, imageTarPrefix) && strings.HasSuffix(n, imageTarSuffix) {
			img, err := tarImage(filepath.Join(dir, n))
			if err != nil {
				return nil, err
			}
			if want := strings.TrimSuffix(strings.TrimPrefix(n, imageTarPrefix), imageTarSuffix); img.Tag != want {
				return nil, fmt.Errorf("%s holds the image tagged %q, not %q", n, img.Tag, want)
			}
			img.File = n
			r.Images = append(r.Images, img)
		}
	}
	if len(r.Images) == 0 {
		return nil, fmt.Errorf("%s: no image archive (%s<tag>%s)", dir, imageTarPrefix, imageTarSuffix)
	}
	return r, nil
}

func fileSHA256(path string) (string, error) {
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

// indexImage finds the image index (the one index.json entry of that media type) and its tag.
func indexImage(im *v1.IndexManifest, where string) (releaseImage, error) {
	var img releaseImage
	n := 0
	for _, d := range im.Manifests {
		if d.MediaType == types.OCIImageIndex {
			img = releaseImage{Tag: d.Annotations[annotationRefName], Digest: d.Digest}
			n++
		}
	}
	if n != 1 {
		return releaseImage{}, fmt.Errorf("%s: %d image indexes in index.json, want 1", where, n)
	}
	return img, nil
}

// tarImage reads the image index of an OCI layout archive (make release's .oci.tar).
func tarImage(path string) (releaseImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return releaseImage{}, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return releaseImage{}, fmt.Errorf("%s: no index.json", path)
		}
		if err != nil {
			return releaseImage{}, fmt.Errorf("%s: %w", path, err)
		}
		if h.Name != "index.json" {
			continue
		}
		im, err := v1.ParseIndexManifest(tr)
		if err != nil {
			return releaseImage{}, fmt.Errorf("%s: index.json: %w", path, err)
		}
		return indexImage(im, path)
	}
}

// layoutImage reads the image index of an OCI image layout directory.
func layoutImage(dir string) (releaseImage, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return releaseImage{}, fmt.Errorf("%s: not an OCI image layout: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return releaseImage{}, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return releaseImage{}, err
	}
	return indexImage(im, dir)
}

// attachment is a bundle to attach to an image.
type attachment struct {
	bundle        []byte
	predicateType string
}

// bundleArtifact is a Sigstore bundle as an OCI 1.1 artifact referring to an image, laid out
// as cosign v3 attaches bundles (cosign specs/BUNDLE_SPEC.md): artifactType and the one layer
// are the bundle media type, the config is the empty descriptor, annotations say the content
// (a DSSE envelope), its predicate type and when it was made.
type bundleArtifact struct {
	bundle, config v1.Layer
	raw            []byte
}

type artifactManifest struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Subject       *v1.Descriptor    `json:"subject,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

func newBundleArtifact(a attachment, subject v1.Descriptor, created time.Time) (v1.Image, error) {
	c := &bundleArtifact{
		bundle: static.NewLayer(a.bundle, BundleMediaType),
		config: static.NewLayer([]byte("{}"), emptyConfigType),
	}
	bd, err := partial.Descriptor(c.bundle)
	if err != nil {
		return nil, err
	}
	bd.Annotations = map[string]string{annotationTitle: bd.Digest.Algorithm + "-" + bd.Digest.Hex + bundleSuffix}
	cd, err := partial.Descriptor(c.config)
	if err != nil {
		return nil, err
	}
	cd.Data = []byte("{}")
	subject = v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	c.raw, err = json.Marshal(artifactManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  BundleMediaType,
		Config:        *cd,
		Layers:        []v1.Descriptor{*bd},
		Subject:       &subject,
		Annotations: map[string]string{
			annotationContent:  "dsse-envelope",
			annotationPredType: a.predicateType,
			annotationCreated:  created.UTC().Format(time.RFC3339),
		},
	})
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(c)
}

func (c *bundleArtifact) RawConfigFile() ([]byte, error)      { return []byte("{}"), nil }
func (c *bundleArtifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c *bundleArtifact) RawManifest() ([]byte, error)        { return c.raw, nil }
func (c *bundleArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range []v1.Layer{c.bundle, c.config} {
		if d, err := l.Digest(); err == nil && d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("bundle artifact has no blob %s", h)
}

// attachToLayout replaces the bundle referrers of the layout's image with as: index.json lists
// them (with their artifactType) beside the image index and its SBOMs, and make push-image
// pushes them with the image.
func attachToLayout(dir string, img releaseImage, as []attachment, created time.Time) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(im.Manifests, func(d v1.Descriptor) bool { return d.Digest == img.Digest })
	if i < 0 {
		return fmt.Errorf("no image %s", img.Digest)
	}
	subject := im.Manifests[i]
	if err := p.RemoveDescriptors(func(d v1.Descriptor) bool { return d.ArtifactType == BundleMediaType }); err != nil {
		return err
	}
	for _, a := range as {
		art, err := newBundleArtifact(a, subject, created)
		if err != nil {
			return err
		}
		if err := p.AppendImage(art); err != nil {
			return err
		}
	}
	return nil
}

// attachedBundle is a bundle found attached to an image.
type attachedBundle struct {
	Subject       v1.Hash
	PredicateType string
	Data          []byte
}

// readAttached reads the bundle artifacts of img (listed by index.json in a layout, by the
// referrers API or tag in a registry).
func readAttached(descs []v1.Descriptor, image func(v1.Hash) (v1.Image, error)) ([]attachedBundle, error) {
	var out []attachedBundle
	for _, d := range descs {
		// Some registries list a referrer's config media type as its artifactType (the
		// in-process one of go-containerregistry does): the manifest's artifactType decides.
		if d.MediaType != types.OCIManifestSchema1 || (d.ArtifactType != BundleMediaType && d.ArtifactType != emptyConfigType) {
			continue
		}
		art, err := image(d.Digest)
		if err != nil {
			return nil, err
		}
		m, err := art.Manifest()
		if err != nil {
			return nil, err
		}
		if m.ArtifactType != BundleMediaType {
			continue
		}
		if m.Subject == nil || len(m.Layers) != 1 || m.Layers[0].MediaType != BundleMediaType {
			return nil, fmt.Errorf("bundle artifact %s: want a subject and one %s layer", d.Digest, BundleMediaType)
		}
		l, err := art.LayerByDigest(m.Layers[0].Digest)
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(rc, 16<<20))
		rc.Close()
		if err != nil {
			return nil, err
		}
		if h, _, err := v1.SHA256(bytes.NewReader(data)); err != nil || h != m.Layers[0].Digest {
			return nil, fmt.Errorf("bundle artifact %s: layer digest mismatch", d.Digest)
		}
		out = append(out, attachedBundle{Subject: m.Subject.Digest, PredicateType: m.Annotations[annotationPredType], Data: data})
	}
	return out, nil
}

// layoutAttached reads a layout's image and the bundles attached to it.
func layoutAttached(dir string) (releaseImage, []attachedBundle, error) {
	img, err := layoutImage(dir)
	if err != nil {
		return releaseImage{}, nil, err
	}
	p, _ := layout.FromPath(dir)
	top, err := p.ImageIndex()
	if err != nil {
		return releaseImage{}, nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return releaseImage{}, nil, err
	}
	bs, err := readAttached(im.Manifests, top.Image)
	return img, bs, err
}

// registryAttached resolves ref in its registry and reads the bundles referring to it.
func registryAttached(ref string, opts ...remote.Option) (v1.Hash, []attachedBundle, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return v1.Hash{}, nil, err
	}
	desc, err := remote.Head(r, opts...)
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("%s: %w", ref, err)
	}
	refs, err := remote.Referrers(r.Context().Digest(desc.Digest.String()), opts...)
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("%s: referrers: %w", ref, err)
	}
	im, err := refs.IndexManifest()
	if err != nil {
		return v1.Hash{}, nil, err
	}
	bs, err := readAttached(im.Manifests, func(h v1.Hash) (v1.Image, error) {
		return remote.Image(r.Context().Digest(h.String()), opts...)
	})
	return desc.Digest, bs, err
}
