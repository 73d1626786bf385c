package ociimage

import (
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The SBOM is attached as an OCI 1.1 artifact (image-spec manifest.md, "Guidelines for
// Artifact Usage"): a manifest with artifactType application/spdx+json, the empty config and
// the SPDX document as its one blob, whose subject is the platform image. Registries list it
// through the referrers API (or the referrers tag schema), so it can be found, signed or
// replaced without changing the image's digest, and the runtime filesystem holds only what runs.
const (
	SBOMArtifactType = "application/spdx+json"
	SBOMFileName     = "sbom.spdx.json"
	emptyConfigType  = "application/vnd.oci.empty.v1+json"
)

var emptyConfig = []byte("{}")

// artifactManifest is an OCI 1.1 image manifest; go-containerregistry's v1.Manifest has no
// artifactType field.
type artifactManifest struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Subject       *v1.Descriptor    `json:"subject,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// sbomArtifact is a v1.Image (so layouts and registries take it like any image) that reports
// its artifactType in descriptors.
type sbomArtifact struct {
	v1.Image
	core *artifactCore
}

func (s *sbomArtifact) ArtifactType() (string, error) { return SBOMArtifactType, nil }

type artifactCore struct {
	doc      v1.Layer
	config   v1.Layer
	manifest artifactManifest
	raw      []byte
}

func newSBOMArtifact(doc *SPDXDocument, annotations map[string]string) (*sbomArtifact, error) {
	data, err := MarshalSBOM(doc)
	if err != nil {
		return nil, err
	}
	c := &artifactCore{
		doc:    static.NewLayer(data, SBOMArtifactType),
		config: static.NewLayer(emptyConfig, emptyConfigType),
	}
	docDesc, err := partial.Descriptor(c.doc)
	if err != nil {
		return nil, err
	}
	docDesc.Annotations = map[string]string{"org.opencontainers.image.title": SBOMFileName}
	cfgDesc, err := partial.Descriptor(c.config)
	if err != nil {
		return nil, err
	}
	cfgDesc.Data = emptyConfig
	c.manifest = artifactManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMArtifactType,
		Config:        *cfgDesc,
		Layers:        []v1.Descriptor{*docDesc},
		Annotations:   annotations,
	}
	return c.artifact()
}

func (c *artifactCore) artifact() (*sbomArtifact, error) {
	raw, err := json.Marshal(c.manifest)
	if err != nil {
		return nil, err
	}
	c.raw = raw
	img, err := partial.CompressedToImage(c)
	if err != nil {
		return nil, err
	}
	return &sbomArtifact{Image: img, core: c}, nil
}

// withSubject returns the artifact referring to subject.
func (s *sbomArtifact) withSubject(subject v1.Descriptor) v1.Image {
	c := *s.core
	c.manifest.Subject = &subject
	a, err := c.artifact()
	if err != nil {
		panic(err) // marshaling the same types just succeeded
	}
	return a
}

func (c *artifactCore) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (c *artifactCore) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (c *artifactCore) RawManifest() ([]byte, error)        { return c.raw, nil }

func (c *artifactCore) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range []v1.Layer{c.doc, c.config} {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		if d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("SBOM artifact has no blob %s", h)
}
