// Package ociimage assembles pool-scheduler's container image without a container engine: a
// static, nonroot, scratch-based OCI image per platform from the release binaries, an OCI image
// index over the platforms, and an SPDX SBOM per platform attached as an OCI 1.1 referrer. It
// writes an OCI image layout and pushes one to a registry with go-containerregistry.
//
// The image is what the Dockerfile's final stage (distroless static, nonroot) holds, minus the
// base image's CA certificates and time zone data, which neither binary reads: the scheduler and
// the labeler reach the API server with the service account's CA, and the domain labeler reads
// the instance metadata service over plain HTTP.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

// The image's fixed shape, shared with the Dockerfile's final stage.
const (
	// BinDir is where the binaries are installed.
	BinDir = "/usr/local/bin"
	// User is the numeric nonroot user and group (distroless' nonroot), so Kubernetes'
	// runAsNonRoot can verify it without an /etc/passwd lookup.
	User = "65532:65532"
	// Entrypoint is the scheduler; the labeler is run with `command: [/usr/local/bin/pool-labeler]`.
	Entrypoint = BinDir + "/pool-scheduler"
	// WorkingDir is the nonroot user's home, as in distroless.
	WorkingDir = "/home/nonroot"
)

// DefaultSource is the repository the image is built from (org.opencontainers.image.source).
const DefaultSource = "https://github.com/pool-scheduler/pool-scheduler"

// Binaries are the programs every platform's image holds, in BinDir.
var Binaries = []string{"pool-scheduler", "pool-labeler"}

// OCI annotation and label keys (image-spec annotations.md).
const (
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationTitle    = "org.opencontainers.image.title"
	AnnotationDesc     = "org.opencontainers.image.description"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
)

// Options describe one build.
type Options struct {
	// Version is the release (or git describe) the binaries were stamped with.
	Version string
	// Revision is the full commit the binaries were built from.
	Revision string
	// Source is the repository URL.
	Source string
	// Created is the build time written to the config, labels and layer entries. Use the commit's
	// time (SOURCE_DATE_EPOCH): the same binaries then give the same image digest.
	Created time.Time
	// Platforms maps "os/arch" to the directory holding that platform's Binaries.
	Platforms map[string]string
}

// Result is a built multi-platform image and its SBOMs.
type Result struct {
	Index v1.ImageIndex
	// SBOMs are OCI 1.1 artifacts, one per platform image, whose subject is that image.
	SBOMs []v1.Image
}

// Build assembles the image index: one image per platform, each with a base layer (passwd,
// group, /tmp, the nonroot home) and a layer with the binaries, and an SBOM per image.
func Build(o Options) (*Result, error) {
	if o.Version == "" || o.Revision == "" || o.Source == "" {
		return nil, fmt.Errorf("version, revision and source are required (got %q, %q, %q)", o.Version, o.Revision, o.Source)
	}
	if len(o.Platforms) == 0 {
		return nil, fmt.Errorf("no platform given")
	}
	names := make([]string, 0, len(o.Platforms))
	for p := range o.Platforms {
		names = append(names, p)
	}
	sort.Strings(names)

	base, err := layer(baseFiles(o.Created))
	if err != nil {
		return nil, err
	}
	images := make([]v1.Image, len(names))
	sboms := make([]v1.Image, len(names))
	platforms := make([]*v1.Platform, len(names))
	// Compressing ~130 MB of binaries per platform dominates: one platform per core.
	var g errgroup.Group
	for i, name := range names {
		g.Go(func() error {
			plat, err := v1.ParsePlatform(name)
			if err != nil || plat.OS == "" || plat.Architecture == "" {
				return fmt.Errorf("platform %q: want os/arch, e.g. linux/amd64", name)
			}
			img, sbom, err := platformImage(o, base, plat, o.Platforms[name])
			if err != nil {
				return fmt.Errorf("platform %s: %w", name, err)
			}
			images[i], sboms[i], platforms[i] = img, sbom, plat
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range images {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platforms[i]},
		})
	}
	idx = mutate.Annotations(idx, annotations(o)).(v1.ImageIndex)

	// Each SBOM refers to its platform image, whose digest is only known now.
	for i, img := range images {
		desc, err := descriptorOf(img)
		if err != nil {
			return nil, err
		}
		sboms[i] = sboms[i].(*sbomArtifact).withSubject(desc)
	}
	return &Result{Index: idx, SBOMs: sboms}, nil
}

func platformImage(o Options, base v1.Layer, plat *v1.Platform, dir string) (v1.Image, v1.Image, error) {
	var bins []file
	var paths []string
	for _, name := range Binaries {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("binary %s: %w (build it with `make binaries GOOS=%s GOARCH=%s BIN=%s`)", name, err, plat.OS, plat.Architecture, dir)
		}
		if err := checkStatic(p, plat); err != nil {
			return nil, nil, err
		}
		bins = append(bins, file{name: path.Join(strings.TrimPrefix(BinDir, "/"), name), mode: 0o755, data: data})
		paths = append(paths, p)
	}
	binLayer, err := layer(append(dirs(o.Created, "usr/", "usr/local/", "usr/local/bin/"), stamp(bins, o.Created)...))
	if err != nil {
		return nil, nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: o.Created}, CreatedBy: "pool-scheduler image: /etc/passwd, /etc/group, /tmp, /home/nonroot (as distroless static)",
		}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: o.Created}, CreatedBy: "pool-scheduler image: COPY " + strings.Join(Binaries, " ") + " " + BinDir + "/",
		}},
	)
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = o.Source
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		Env:        []string{"PATH=" + BinDir},
		WorkingDir: WorkingDir,
		Labels:     annotations(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, err
	}
	img = mutate.Annotations(img, annotations(o)).(v1.Image)

	doc, err := SBOM(SBOMOptions{
		Name:     fmt.Sprintf("pool-scheduler-%s-%s", o.Version, strings.ReplaceAll(plat.String(), "/", "-")),
		Version:  o.Version,
		Revision: o.Revision,
		Source:   o.Source,
		Created:  o.Created,
		Binaries: paths,
	})
	if err != nil {
		return nil, nil, err
	}
	sbomAnnotations := annotations(o)
	sbomAnnotations[AnnotationTitle] = "pool-scheduler SBOM (SPDX 2.3), " + plat.String()
	sbomAnnotations[AnnotationDesc] = "The Go modules linked into the image's binaries, from their embedded build info"
	sbom, err := newSBOMArtifact(doc, sbomAnnotations)
	if err != nil {
		return nil, nil, err
	}
	return img, sbom, nil
}

func annotations(o Options) map[string]string {
	return map[string]string{
		AnnotationTitle:    "pool-scheduler",
		AnnotationDesc:     "kube-scheduler with node-pool plugins (NodePoolReady, NodePoolAffinity, SystemPoolGuard, DomainSpread) and pool-labeler",
		AnnotationVersion:  o.Version,
		AnnotationRevision: o.Revision,
		AnnotationSource:   o.Source,
		AnnotationCreated:  o.Created.UTC().Format(time.RFC3339),
	}
}

// file is one tar entry.
type file struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
	modTime  time.Time
}

func dirs(t time.Time, names ...string) []file {
	var out []file
	for _, n := range names {
		out = append(out, file{name: n, mode: 0o755, dir: true, modTime: t})
	}
	return out
}

func stamp(files []file, t time.Time) []file {
	for i := range files {
		files[i].modTime = t
	}
	return files
}

// baseFiles are what distroless static's nonroot variant provides that a program may look up:
// the users (for tools that map 65532 to a name), a writable /tmp and the nonroot home.
func baseFiles(t time.Time) []file {
	return stamp([]file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: 65532, gid: 65532},
		{name: "root/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}, t)
}

// layer writes files as a gzipped tar once, in memory; go-containerregistry then reads the
// digests from it instead of compressing again for each one.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: f.modTime,
			Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// descriptorOf returns the descriptor an index or a referrer uses for img.
func descriptorOf(img v1.Image) (v1.Descriptor, error) {
	d, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := img.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: size, Digest: d}, nil
}
