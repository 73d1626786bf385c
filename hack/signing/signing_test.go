package main

import (
	"archive/tar"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/types/known/structpb"

	intoto "github.com/in-toto/attestation/go/v1"
)

const (
	testVersion = "v1.2.3"
	testRepo    = "ghcr.io/pool-scheduler/pool-scheduler"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var testLines = []string{"1.34", "1.36"}

var testBuild = buildInfo{
	Version:      testVersion,
	BuilderID:    "https://github.com/pool-scheduler/pool-scheduler/.github/workflows/release.yaml@refs/tags/" + testVersion,
	Source:       "https://github.com/pool-scheduler/pool-scheduler",
	Ref:          "refs/tags/" + testVersion,
	Commit:       testCommit,
	Workflow:     ".github/workflows/release.yaml",
	InvocationID: "https://github.com/pool-scheduler/pool-scheduler/actions/runs/1/attempts/1",
	GoVersion:    "go1.26.8",
}

// fixture is a release as make release leaves it: the release directory and one image layout
// per line (a random multi-platform image index, tagged <version>-k8s<line>).
type fixture struct {
	dir     string
	layouts map[string]string
}

func writeRelease(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{dir: filepath.Join(root, testVersion), layouts: map[string]string{}}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, line := range testLines {
		idx, err := random.Index(256, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		tag := testVersion + "-k8s" + line
		dir := filepath.Join(root, "image-"+testVersion, "k8s-"+line)
		p, err := layout.Write(dir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: tag})); err != nil {
			t.Fatal(err)
		}
		f.layouts[line] = dir
		tarDir(t, dir, filepath.Join(f.dir, imageTarPrefix+tag+imageTarSuffix))
	}
	for name, content := range map[string]string{
		"pool-scheduler-" + testVersion + ".tgz":              "chart",
		"pool-scheduler-k8s1.34.yaml":                         "install 1.34",
		"kubectl-pool_" + testVersion + "_linux_amd64.tar.gz": "plugin",
	} {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSums(t, f.dir)
	return f
}

// writeSums writes SHA256SUMS as make release does (release.WriteChecksums).
func writeSums(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if e.Name() == SumsFile || strings.HasSuffix(e.Name(), bundleSuffix) {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tarDir(t *testing.T, dir, out string) {
	t.Helper()
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a signed fixture, so that a case can change its copy.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

func (f fixture) layoutList() []string {
	var ls []string
	for _, line := range testLines {
		ls = append(ls, f.layouts[line])
	}
	return ls
}

// clone copies the release and its layouts into a fresh directory.
func (f fixture) clone(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	c := fixture{dir: filepath.Join(root, testVersion), layouts: map[string]string{}}
	copyTree(t, f.dir, c.dir)
	for line, l := range f.layouts {
		c.layouts[line] = filepath.Join(root, "image-"+testVersion, "k8s-"+line)
		copyTree(t, l, c.layouts[line])
	}
	return c
}

// push writes a layout to a registry as make push-image does (internal/ociimage.Push): the
// image index under its tag, every other manifest of index.json (SBOMs, bundles) by digest, so
// the registry links the referrers to their subject.
func push(t *testing.T, dir, repo string) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.MediaType == types.OCIImageIndex {
			idx, err := top.ImageIndex(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.WriteIndex(r.Tag(d.Annotations[annotationRefName]), idx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		img, err := top.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(r.Digest(d.Digest.String()), img); err != nil {
			t.Fatal(err)
		}
	}
}

// startRegistry runs go-containerregistry's registry in process, with or without the OCI
// referrers API.
func startRegistry(t *testing.T, referrersAPI bool) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrersAPI), registry.Logger(nopLogger())))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func keys(t *testing.T) (privPEM, pubPEM []byte) {
	t.Helper()
	privPEM, pubPEM, err := generateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return privPEM, pubPEM
}

// signedRelease is a release key-signed with its layouts.
func signedRelease(t *testing.T, privPEM []byte) fixture {
	t.Helper()
	f := writeRelease(t)
	s, err := keySigner(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signRelease(context.Background(), s, f.dir, testRepo, f.layoutList(), testBuild, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestVerifyKeySigned signs a release with a key, pushes its layouts to an in-process registry
// and verifies the release directory, the layouts and the pushed images; then each way of
// tampering with it, or verifying it with the wrong key, is refused with its own error.
func TestVerifyKeySigned(t *testing.T) {
	privPEM, pubPEM := keys(t)
	_, otherPub := keys(t)
	signed := signedRelease(t, privPEM)

	tag := func(line string) string { return testVersion + "-k8s" + line }
	chart := "pool-scheduler-" + testVersion + ".tgz"
	cases := []struct {
		name string
		// change tampers with the release (a copy) before its layouts are pushed to the
		// registry, changeRegistry with what is in the registry after.
		change         func(t *testing.T, f fixture)
		changeRegistry func(t *testing.T, repo string)
		pub            []byte
		// images: verify the pushed images too; noReferrersAPI: the registry has no referrers
		// API (the pusher keeps the referrers tag sha256-<digest>).
		images, noReferrersAPI bool
		wantErr                string
	}{
		{name: "signed release, layouts and pushed images verify", pub: pubPEM, images: true},
		{name: "pushed to a registry without the referrers API (referrers tag schema)", pub: pubPEM, images: true, noReferrersAPI: true},
		{name: "another key", pub: otherPub, wantErr: SumsBundle + ": not signed by the release key"},
		{
			name: "a release file changed",
			change: func(t *testing.T, f fixture) {
				writeFile(t, filepath.Join(f.dir, chart), "another chart")
			},
			pub: pubPEM, wantErr: chart + ": sha256 ",
		},
		{
			name: "a release file changed and SHA256SUMS rewritten to match",
			change: func(t *testing.T, f fixture) {
				writeFile(t, filepath.Join(f.dir, chart), "another chart")
				writeSums(t, f.dir)
			},
			pub: pubPEM, wantErr: SumsBundle + ": not signed by the release key, or not for sha256:",
		},
		{
			name: "a file added after signing",
			change: func(t *testing.T, f fixture) {
				writeFile(t, filepath.Join(f.dir, "extra.yaml"), "x")
			},
			pub: pubPEM, wantErr: "extra.yaml is not listed in SHA256SUMS",
		},
		{
			name:    "SHA256SUMS signature missing",
			change:  func(t *testing.T, f fixture) { remove(t, filepath.Join(f.dir, SumsBundle)) },
			pub:     pubPEM,
			wantErr: SumsBundle + " is missing: the release is not signed",
		},
		{
			name: "image signature missing",
			change: func(t *testing.T, f fixture) {
				remove(t, filepath.Join(f.dir, imageTarPrefix+tag("1.36")+bundleSuffix))
			},
			pub: pubPEM, wantErr: imageTarPrefix + tag("1.36") + bundleSuffix + " is missing",
		},
		{
			name: "an image's signature replaced by another image's",
			change: func(t *testing.T, f fixture) {
				data, err := os.ReadFile(filepath.Join(f.dir, imageTarPrefix+tag("1.34")+bundleSuffix))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(f.dir, imageTarPrefix+tag("1.36")+bundleSuffix), string(data))
			},
			pub: pubPEM, wantErr: imageTarPrefix + tag("1.36") + bundleSuffix + ": not signed by the release key, or not for sha256:",
		},
		{
			name:    "provenance missing",
			change:  func(t *testing.T, f fixture) { remove(t, filepath.Join(f.dir, ProvenanceBundle)) },
			pub:     pubPEM,
			wantErr: ProvenanceBundle + " is missing",
		},
		{
			name: "pushed image digest changed (another image under the tag)",
			changeRegistry: func(t *testing.T, repo string) {
				idx, err := random.Index(256, 1, 2)
				if err != nil {
					t.Fatal(err)
				}
				if err := remote.WriteIndex(mustTag(t, repo+":"+tag("1.34")), idx); err != nil {
					t.Fatal(err)
				}
			},
			pub: pubPEM, images: true, wantErr: "image " + tag("1.34") + " is sha256:",
		},
		{
			name: "layout pushed without its signature referrers",
			change: func(t *testing.T, f fixture) {
				p, err := layout.FromPath(f.layouts["1.36"])
				if err != nil {
					t.Fatal(err)
				}
				if err := p.RemoveDescriptors(func(d v1.Descriptor) bool { return d.ArtifactType == BundleMediaType }); err != nil {
					t.Fatal(err)
				}
			},
			pub: pubPEM, images: true, wantErr: "signature attached: false, provenance attached: false",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := signed.clone(t)
			repo := startRegistry(t, !tc.noReferrersAPI) + "/pool-scheduler/pool-scheduler"
			if tc.change != nil {
				tc.change(t, f)
			}
			for _, l := range f.layoutList() {
				push(t, l, repo)
			}
			if tc.changeRegistry != nil {
				tc.changeRegistry(t, repo)
			}
			v, err := keyVerifier(tc.pub)
			if err != nil {
				t.Fatal(err)
			}
			o := verifyOptions{ReleaseDir: f.dir, Layouts: f.layoutList(), Repository: testRepo, Verifier: v}
			if tc.images {
				for _, line := range testLines {
					o.Images = append(o.Images, repo+":"+tag(line))
				}
			}
			rep, err := verifyRelease(o)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr == "" {
				for _, want := range []string{
					"SHA256SUMS: signed by the release key; 5 files match it",
					"image " + testRepo + ":" + tag("1.36") + "@sha256:",
					repo + ":" + tag("1.34") + ": " + tag("1.34") + "@sha256:",
					"provenance: https://slsa.dev/provenance/v1, built by " + testBuild.BuilderID + " from git+https://github.com/pool-scheduler/pool-scheduler@refs/tags/v1.2.3 " + testCommit,
				} {
					if !strings.Contains(rep, want) {
						t.Errorf("report lacks %q:\n%s", want, rep)
					}
				}
			}
		})
	}
}

func statementFor(name string, digest []byte) *intoto.Statement {
	return &intoto.Statement{
		Subject:       []*intoto.ResourceDescriptor{{Name: name, Digest: map[string]string{"sha256": hex.EncodeToString(digest)}}},
		PredicateType: SignPredicateType,
		Predicate:     &structpb.Struct{},
	}
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

func mustTag(t *testing.T, ref string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("verify: %v", err)
	case want != "" && err == nil:
		t.Fatalf("verify passed, want an error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("verify: %v\nwant an error containing %q", err, want)
	}
}

// TestSignedContent checks what a signature says: the statements' subjects and predicates, the
// provenance (builder, workflow, source commit, Go version), and the referrer artifacts' layout
// (cosign's bundle spec).
func TestSignedContent(t *testing.T) {
	privPEM, pubPEM := keys(t)
	f := signedRelease(t, privPEM)
	v, err := keyVerifier(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(f.dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(f.dir, ProvenanceBundle))
	if err != nil {
		t.Fatal(err)
	}
	prov, err := v.statement(data, sha256Hash(sums), ProvenancePredicateType)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, s := range prov.GetSubject() {
		subjects = append(subjects, s.GetName())
	}
	wantSubjects := []string{
		SumsFile,
		"kubectl-pool_v1.2.3_linux_amd64.tar.gz",
		"pool-scheduler-image-v1.2.3-k8s1.34.oci.tar",
		"pool-scheduler-image-v1.2.3-k8s1.36.oci.tar",
		"pool-scheduler-k8s1.34.yaml",
		"pool-scheduler-v1.2.3.tgz",
		testRepo + ":v1.2.3-k8s1.34",
		testRepo + ":v1.2.3-k8s1.36",
	}
	if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
		t.Errorf("provenance subjects (-want +got):\n%s", diff)
	}
	wantPred := map[string]any{
		"buildDefinition": map[string]any{
			"buildType": BuildType,
			"externalParameters": map[string]any{
				"version":  testVersion,
				"workflow": map[string]any{"repository": testBuild.Source, "path": ".github/workflows/release.yaml", "ref": "refs/tags/v1.2.3"},
			},
			"internalParameters": map[string]any{"goVersion": "go1.26.8"},
			"resolvedDependencies": []any{map[string]any{
				"uri":    "git+https://github.com/pool-scheduler/pool-scheduler@refs/tags/v1.2.3",
				"digest": map[string]any{"gitCommit": testCommit},
			}},
		},
		"runDetails": map[string]any{
			"builder":  map[string]any{"id": testBuild.BuilderID},
			"metadata": map[string]any{"invocationId": testBuild.InvocationID},
		},
	}
	if diff := cmp.Diff(wantPred, prov.GetPredicate().AsMap()); diff != "" {
		t.Errorf("provenance predicate (-want +got):\n%s", diff)
	}

	img, bs, err := layoutAttached(f.layouts["1.34"])
	if err != nil {
		t.Fatal(err)
	}
	var preds []string
	for _, b := range bs {
		if b.Subject != img.Digest {
			t.Errorf("bundle refers to %s, want the image index %s", b.Subject, img.Digest)
		}
		preds = append(preds, b.PredicateType)
	}
	sort.Strings(preds)
	if diff := cmp.Diff([]string{SignPredicateType, ProvenancePredicateType}, preds); diff != "" {
		t.Errorf("attached bundles (-want +got):\n%s", diff)
	}
	// The referrer manifest as cosign attaches a bundle (specs/BUNDLE_SPEC.md).
	p, err := layout.FromPath(f.layouts["1.34"])
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.ArtifactType != BundleMediaType {
			continue
		}
		art, err := top.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := art.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]any{"mediaType": string(m.MediaType), "config": string(m.Config.MediaType), "layers": len(m.Layers), "layer": string(m.Layers[0].MediaType),
			"subject": string(m.Subject.MediaType), "content": m.Annotations[annotationContent], "created": m.Annotations[annotationCreated]}
		want := map[string]any{"mediaType": string(types.OCIManifestSchema1), "config": emptyConfigType, "layers": 1, "layer": BundleMediaType,
			"subject": string(types.OCIImageIndex), "content": "dsse-envelope", "created": "1970-01-01T00:00:00Z"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("bundle referrer %s (-want +got):\n%s", d.Digest, diff)
		}
	}
}

// TestSignRefuses: signing checks the release first.
func TestSignRefuses(t *testing.T) {
	privPEM, _ := keys(t)
	s, err := keySigner(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		change  func(t *testing.T, f fixture) []string
		wantErr string
	}{
		{
			name: "a file that does not match SHA256SUMS",
			change: func(t *testing.T, f fixture) []string {
				writeFile(t, filepath.Join(f.dir, "pool-scheduler-k8s1.34.yaml"), "changed")
				return nil
			},
			wantErr: "pool-scheduler-k8s1.34.yaml: sha256 ",
		},
		{
			name: "a layout that is not a release image",
			change: func(t *testing.T, f fixture) []string {
				other := writeRelease(t)
				return []string{other.layouts["1.34"]}
			},
			wantErr: "which is not one of the release's images",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := writeRelease(t)
			layouts := tc.change(t, f)
			_, err := signRelease(context.Background(), s, f.dir, testRepo, layouts, testBuild, time.Unix(0, 0))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("sign: %v, want an error containing %q", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(f.dir, SumsBundle)); !os.IsNotExist(err) {
				t.Errorf("sign wrote %s for a release it refused", SumsBundle)
			}
		})
	}
}

// virtualRekor logs a bundle's DSSE envelope in a VirtualSigstore's Rekor, as Rekor does for
// the keyless workflow: the entry, with its signed entry timestamp and inclusion proof, goes
// into the bundle.
type virtualRekor struct {
	vs   *ca.VirtualSigstore
	leaf *x509.Certificate
}

func (r virtualRekor) GetTransparencyLogEntry(_ context.Context, _ []byte, b *protobundle.Bundle) error {
	env := b.GetDsseEnvelope()
	sig := env.GetSignatures()[0].GetSig()
	e := &dsse.Envelope{PayloadType: env.GetPayloadType(), Payload: base64.StdEncoding.EncodeToString(env.GetPayload()),
		Signatures: []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}}}
	// Logged while the certificate (valid 10 minutes from NotBefore) is.
	entry, err := r.vs.GenerateTlogEntry(r.leaf, e, sig, r.leaf.NotBefore.Add(5*time.Minute).Unix(), true)
	if err != nil {
		return err
	}
	// The entry's proto lacks its kind and signed entry timestamp (tlog.NewEntry keeps the
	// latter apart); Rekor's response carries both.
	tle := entry.TransparencyLogEntry()
	tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
	set, err := r.vs.RekorSignPayload(tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(tle.GetCanonicalizedBody()),
		IntegratedTime: tle.GetIntegratedTime(), LogIndex: tle.GetLogIndex(), LogID: hex.EncodeToString(tle.GetLogId().GetKeyId())})
	if err != nil {
		return err
	}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	b.VerificationMaterial.TlogEntries = append(b.VerificationMaterial.TlogEntries, tle)
	return nil
}

type staticCert []byte

func (c staticCert) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// TestVerifyKeyless signs a release as the workflow does (a short-lived certificate for the
// workflow's identity, every signature logged), against sigstore-go's VirtualSigstore (a
// Fulcio CA, Rekor log and TSA in memory), and verifies it offline with that trusted root:
// the workflow's identity and issuer pass, any other identity or issuer is refused.
func TestVerifyKeyless(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	identity := testBuild.BuilderID
	leaf, priv, err := vs.GenerateLeafCert(identity, githubIssuer)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := newKeyPair(priv.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	s := &signer{keypair: kp, opts: sign.BundleOptions{
		CertificateProvider: staticCert(leaf.Raw),
		TransparencyLogs:    []sign.Transparency{virtualRekor{vs: vs, leaf: leaf}},
	}}
	f := writeRelease(t)
	if _, err := signRelease(context.Background(), s, f.dir, testRepo, f.layoutList(), testBuild, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, identity, identityRegexp, issuer string
		key, requireSCT                        bool
		wantErr                                string
	}{
		{name: "the workflow's identity", identity: identity, issuer: githubIssuer},
		{name: "the workflow's identity, by regexp", identityRegexp: `^https://github\.com/pool-scheduler/pool-scheduler/\.github/workflows/release\.yaml@refs/tags/v`, issuer: githubIssuer},
		{name: "another workflow", identity: "https://github.com/pool-scheduler/pool-scheduler/.github/workflows/other.yaml@refs/heads/main", issuer: githubIssuer, wantErr: "not signed by identity"},
		{name: "another repository", identityRegexp: `^https://github\.com/someone/fork/`, issuer: githubIssuer, wantErr: "not signed by identity"},
		{name: "another issuer", identity: identity, issuer: "https://accounts.google.com", wantErr: "not signed by identity"},
		{name: "no identity given", issuer: githubIssuer, wantErr: "needs --certificate-identity"},
		{name: "a key instead of the trusted root", key: true, wantErr: "not signed by the release key"},
		// make verify-release requires the certificate's CT log timestamp (Fulcio embeds one),
		// which VirtualSigstore's certificates lack.
		{name: "CT log timestamp required", identity: identity, issuer: githubIssuer, requireSCT: true, wantErr: "failed to verify signed certificate timestamp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v *verifier
			var err error
			if tc.key {
				_, pub := keys(t)
				v, err = keyVerifier(pub)
			} else {
				v, err = keylessVerifier(vs, tc.identity, tc.identityRegexp, tc.issuer, tc.requireSCT)
			}
			if err == nil {
				_, err = verifyRelease(verifyOptions{ReleaseDir: f.dir, Layouts: f.layoutList(), Repository: testRepo, Verifier: v})
			}
			checkErr(t, err, tc.wantErr)
		})
	}
}

// TestKeylessWiring: the workflow's signer asks GitHub for an OIDC token with Fulcio's
// audience, and signs with Fulcio's certificate and Rekor's log (neither is reachable here).
func TestKeylessWiring(t *testing.T) {
	var gotAuth, gotAudience string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotAudience = r.Header.Get("Authorization"), r.URL.Query().Get("audience")
		fmt.Fprint(w, `{"value":"the-token"}`)
	}))
	defer srv.Close()
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", srv.URL+"/token?api-version=2.0")
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token")
	tok, err := githubIDToken(context.Background(), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"the-token", "bearer request-token", "sigstore"}, []string{tok, gotAuth, gotAudience}); diff != "" {
		t.Errorf("token request (-want +got):\n%s", diff)
	}
	s, err := keylessSigner(tok, "https://fulcio.example", "https://rekor.example")
	if err != nil {
		t.Fatal(err)
	}
	_, fulcio := s.opts.CertificateProvider.(*sign.Fulcio)
	_, ephemeral := s.keypair.(*sign.EphemeralKeypair)
	got := map[string]any{"fulcio": fulcio, "ephemeral key": ephemeral, "token": s.opts.CertificateProviderOptions.IDToken, "logs": len(s.opts.TransparencyLogs)}
	if diff := cmp.Diff(map[string]any{"fulcio": true, "ephemeral key": true, "token": "the-token", "logs": 1}, got); diff != "" {
		t.Errorf("keyless signer (-want +got):\n%s", diff)
	}
	env := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "pool-scheduler/pool-scheduler",
		"GITHUB_REF": "refs/tags/v1.2.3", "GITHUB_SHA": testCommit, "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1",
		"GITHUB_WORKFLOW_REF": "pool-scheduler/pool-scheduler/.github/workflows/release.yaml@refs/tags/v1.2.3",
	}
	want := testBuild
	want.Version, want.GoVersion = "", ""
	if diff := cmp.Diff(want, githubBuildInfo(func(k string) string { return env[k] })); diff != "" {
		t.Errorf("build info in GitHub Actions (-want +got):\n%s", diff)
	}
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "")
	if _, err := githubIDToken(context.Background(), srv.Client()); err == nil || !strings.Contains(err.Error(), "id-token: write") {
		t.Errorf("without the job's token variables: %v, want an error naming id-token: write", err)
	}
}

// TestKeygen: the generated key signs and its public key verifies, and a key other than ECDSA
// P-256 is refused.
func TestKeygen(t *testing.T) {
	privPEM, pubPEM := keys(t)
	s, err := keySigner(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	v, err := keyVerifier(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	st := sha256.Sum256([]byte("x"))
	b, err := s.signStatement(context.Background(), statementFor("x", st[:]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.statement(b, v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(st[:])}, SignPredicateType); err != nil {
		t.Fatal(err)
	}
	if _, err := keySigner(pubPEM); err == nil {
		t.Error("a public key was accepted as the signing key")
	}
}
