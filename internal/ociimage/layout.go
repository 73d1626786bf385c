package ociimage

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteLayout writes r as a fresh OCI image layout in dir: index.json lists the image index
// (annotated with ref.name = tag) and the SBOM artifacts.
func WriteLayout(dir string, r *Result, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(r.Index, layout.WithAnnotations(map[string]string{AnnotationRefName: tag})); err != nil {
		return err
	}
	for _, s := range r.SBOMs {
		if err := p.AppendImage(s); err != nil {
			return err
		}
	}
	return nil
}

// Layout is an OCI image layout written by WriteLayout.
type Layout struct {
	Path layout.Path
	// Index is the multi-platform image; Tag its ref.name.
	Index v1.ImageIndex
	Tag   string
	// SBOMs are the referrer artifacts, by the digest of the image they describe.
	SBOMs map[v1.Hash]v1.Image
	// Bundles are the Sigstore bundles (signature, provenance) make sign-release attached to
	// the image index (hack/signing), pushed with it as its referrers.
	Bundles []v1.Image
}

// BundleArtifactType is the artifactType of a Sigstore bundle attached to an image as an OCI
// referrer (cosign's specs/BUNDLE_SPEC.md; hack/signing writes them).
const BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// ReadLayout opens a layout written by WriteLayout.
func ReadLayout(dir string) (*Layout, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	l := &Layout{Path: p, SBOMs: map[v1.Hash]v1.Image{}}
	for _, d := range im.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			if l.Index != nil {
				return nil, fmt.Errorf("%s: more than one image index", dir)
			}
			if l.Index, err = top.ImageIndex(d.Digest); err != nil {
				return nil, err
			}
			l.Tag = d.Annotations[AnnotationRefName]
		case d.ArtifactType == SBOMArtifactType:
			img, err := top.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			m, err := img.Manifest()
			if err != nil {
				return nil, err
			}
			if m.Subject == nil {
				return nil, fmt.Errorf("%s: SBOM %s has no subject", dir, d.Digest)
			}
			l.SBOMs[m.Subject.Digest] = img
		case d.ArtifactType == BundleArtifactType:
			img, err := top.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			l.Bundles = append(l.Bundles, img)
		default:
			return nil, fmt.Errorf("%s: unexpected %s %s in index.json", dir, d.MediaType, d.Digest)
		}
	}
	if l.Index == nil {
		return nil, fmt.Errorf("%s: no image index", dir)
	}
	d, err := l.Index.Digest()
	if err != nil {
		return nil, err
	}
	for _, b := range l.Bundles {
		m, err := b.Manifest()
		if err != nil {
			return nil, err
		}
		if m.Subject == nil || m.Subject.Digest != d {
			bd, _ := b.Digest()
			return nil, fmt.Errorf("%s: Sigstore bundle %s does not refer to the image index %s", dir, bd, d)
		}
	}
	return l, nil
}

// Push writes the image index to repo:tag and each SBOM and Sigstore bundle by digest (the
// registry links it to its subject: through the referrers API, or go-containerregistry updates
// the referrers tag when the registry has none). Credentials come from Keychain (docker login,
// docker/login-action in CI, or helm registry login). It returns the pushed reference with its digest.
func Push(l *Layout, repo string, opts ...remote.Option) (name.Digest, error) {
	if l.Tag == "" {
		return name.Digest{}, fmt.Errorf("the layout's image index has no %s annotation to use as tag", AnnotationRefName)
	}
	r, err := name.NewRepository(repo)
	if err != nil {
		return name.Digest{}, fmt.Errorf("repository %q: %w", repo, err)
	}
	opts = append([]remote.Option{remote.WithAuthFromKeychain(Keychain)}, opts...)
	if err := remote.WriteIndex(r.Tag(l.Tag), l.Index, opts...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", r.Tag(l.Tag), err)
	}
	for subject, s := range l.SBOMs {
		d, err := s.Digest()
		if err != nil {
			return name.Digest{}, err
		}
		if err := remote.Write(r.Digest(d.String()), s, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing the SBOM of %s: %w", subject, err)
		}
	}
	for _, b := range l.Bundles {
		d, err := b.Digest()
		if err != nil {
			return name.Digest{}, err
		}
		if err := remote.Write(r.Digest(d.String()), b, opts...); err != nil {
			return name.Digest{}, fmt.Errorf("pushing the Sigstore bundle %s: %w", d, err)
		}
	}
	d, err := l.Index.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Digest(d.String()), nil
}
