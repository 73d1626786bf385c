package ociimage

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// bundleReferrer is a Sigstore bundle artifact referring to subject, as hack/signing attaches
// one to a layout (artifactType in the manifest and in index.json).
type bundleReferrer struct{ v1.Image }

func (bundleReferrer) ArtifactType() (string, error) { return BundleArtifactType, nil }

func newBundleReferrer(t *testing.T, subject v1.Descriptor) v1.Image {
	t.Helper()
	c := &artifactCore{
		doc:    static.NewLayer([]byte(`{"mediaType":"`+BundleArtifactType+`"}`), BundleArtifactType),
		config: static.NewLayer(emptyConfig, emptyConfigType),
	}
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{c.doc, c.config} {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		size, _ := l.Size()
		mt, _ := l.MediaType()
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: d, Size: size})
	}
	descs[1].Data = emptyConfig
	c.manifest = artifactManifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: BundleArtifactType,
		Config: descs[1], Layers: descs[:1], Subject: &subject}
	a, err := c.artifact()
	if err != nil {
		t.Fatal(err)
	}
	return bundleReferrer{a.Image}
}

// TestLayoutBundles: a layout signed by make sign-release (Sigstore bundles attached to the
// image index in index.json) is read, and its bundles are pushed with the image as its
// referrers; a bundle that refers to another image is refused.
func TestLayoutBundles(t *testing.T) {
	write := func(t *testing.T, other bool) (string, v1.Hash, v1.Hash) {
		dir := t.TempDir()
		idx, err := random.Index(128, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := layout.Write(dir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: "v1.2.3-k8s1.34"})); err != nil {
			t.Fatal(err)
		}
		subject := idx
		if other {
			if subject, err = random.Index(128, 1, 1); err != nil {
				t.Fatal(err)
			}
		}
		sd, err := subject.Digest()
		if err != nil {
			t.Fatal(err)
		}
		b := newBundleReferrer(t, v1.Descriptor{MediaType: types.OCIImageIndex, Digest: sd})
		if err := p.AppendImage(b); err != nil {
			t.Fatal(err)
		}
		id, _ := idx.Digest()
		bd, _ := b.Digest()
		return dir, id, bd
	}

	dir, index, bundle := write(t, false)
	l, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Bundles) != 1 {
		t.Fatalf("ReadLayout found %d bundles, want 1", len(l.Bundles))
	}
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/pool-scheduler"
	ref, err := Push(l, repo)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := remote.Referrers(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []v1.Hash
	for _, d := range im.Manifests {
		got = append(got, d.Digest)
	}
	if diff := cmp.Diff([]v1.Hash{bundle}, got); diff != "" || ref.DigestStr() != index.String() {
		t.Errorf("pushed %s; referrers of the index (-want +got):\n%s", ref, diff)
	}

	dir, _, _ = write(t, true)
	if _, err := ReadLayout(dir); err == nil || !strings.Contains(err.Error(), "does not refer to the image index") {
		t.Errorf("a bundle of another image: ReadLayout: %v", err)
	}
}
