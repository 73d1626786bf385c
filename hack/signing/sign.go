package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// BundleMediaType is the Sigstore bundle v0.3 media type, also the artifactType of the OCI
	// referrer that attaches a bundle to an image (cosign's specs/BUNDLE_SPEC.md).
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SignPredicateType is the predicate of a plain signature statement (cosign v3's `cosign
	// sign` with bundles signs the same statement over the image digest).
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
	// ProvenancePredicateType is SLSA v1 build provenance.
	ProvenancePredicateType = "https://slsa.dev/provenance/v1"
	inTotoPayloadType       = "application/vnd.in-toto+json"
	// BuildType names how a release is built: make release, then make sign-release.
	BuildType = "https://github.com/pool-scheduler/pool-scheduler/blob/main/docs/security.md#verifying-a-release"

	// Files of a signed release directory, besides the ones SHA256SUMS lists.
	SumsFile         = "SHA256SUMS"
	SumsBundle       = "SHA256SUMS.sigstore.json"
	ProvenanceBundle = "provenance.sigstore.json"
	bundleSuffix     = ".sigstore.json"

	githubIssuer = "https://token.actions.githubusercontent.com"
)

// imageBundleName is the bundle file of the image archived as tarName (pool-scheduler-image-<tag>.oci.tar).
func imageBundleName(tarName string) string {
	return tarName[:len(tarName)-len(imageTarSuffix)] + bundleSuffix
}

// signer makes Sigstore bundles of in-toto statements: with a key pair and, keyless, a
// certificate provider (Fulcio) and transparency logs (Rekor).
type signer struct {
	keypair sign.Keypair
	opts    sign.BundleOptions
}

func (s *signer) signStatement(ctx context.Context, st *intoto.Statement) ([]byte, error) {
	st.Type = intoto.StatementTypeUri
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("in-toto statement: %w", err)
	}
	payload, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	opts := s.opts
	opts.Context = ctx
	b, err := sign.Bundle(&sign.DSSEData{Data: payload, PayloadType: inTotoPayloadType}, s.keypair, opts)
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(b)
}

// keyPair is a sign.Keypair of an ECDSA P-256 private key read from a file.
type keyPair struct {
	priv *ecdsa.PrivateKey
	hint []byte
}

func newKeyPair(priv *ecdsa.PrivateKey) (*keyPair, error) {
	if priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the key is ECDSA on %s; want P-256", priv.Curve.Params().Name)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &keyPair{priv: priv, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

func (k *keyPair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}
func (k *keyPair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}
func (k *keyPair) GetHint() []byte                { return k.hint }
func (k *keyPair) GetKeyAlgorithm() string        { return "ECDSA" }
func (k *keyPair) GetPublicKey() crypto.PublicKey { return k.priv.Public() }
func (k *keyPair) GetPublicKeyPem() (string, error) {
	p, err := cryptoutils.MarshalPublicKeyToPEM(k.priv.Public())
	return string(p), err
}
func (k *keyPair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	digest := sha256.Sum256(data)
	sig, err := k.priv.Sign(rand.Reader, digest[:], crypto.SHA256)
	return sig, digest[:], err
}

// generateKeyPair returns a new ECDSA P-256 key pair: the private key as PKCS#8 PEM, the public
// key as PKIX PEM (what cosign's --key and openssl read).
func generateKeyPair() (privPEM, pubPEM []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pubPEM, err = cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pubPEM, nil
}

func keySigner(privPEM []byte) (*signer, error) {
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the private key is %T; want ECDSA P-256", k)
	}
	kp, err := newKeyPair(ec)
	if err != nil {
		return nil, err
	}
	return &signer{keypair: kp}, nil
}

func keySignerFromFile(path string) (*signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return keySigner(data)
}

// keylessSigner signs with an ephemeral key whose certificate Fulcio issues for the OIDC
// identity of idToken, each signature logged in Rekor (the bundle carries the log entry with
// its inclusion proof and signed entry timestamp, so verification needs no network).
func keylessSigner(idToken, fulcioURL, rekorURL string) (*signer, error) {
	if idToken == "" {
		return nil, fmt.Errorf("keyless signing needs an OIDC token")
	}
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, err
	}
	return &signer{keypair: kp, opts: sign.BundleOptions{
		CertificateProvider:        sign.NewFulcio(&sign.FulcioOptions{BaseURL: fulcioURL, Retries: 3}),
		CertificateProviderOptions: &sign.CertificateProviderOptions{IDToken: idToken},
		TransparencyLogs:           []sign.Transparency{sign.NewRekor(&sign.RekorOptions{BaseURL: rekorURL, Retries: 3})},
	}}, nil
}

// githubIDToken asks GitHub Actions for the job's OIDC token with the audience Fulcio expects
// ("sigstore"). The job needs `permissions: id-token: write`, which sets the two variables.
func githubIDToken(ctx context.Context, client *http.Client) (string, error) {
	reqURL, reqToken := os.Getenv("ACTIONS_ID_TOKEN_REQUEST_URL"), os.Getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
	if reqURL == "" || reqToken == "" {
		return "", fmt.Errorf("no GitHub Actions OIDC token: ACTIONS_ID_TOKEN_REQUEST_URL/TOKEN are unset (the job needs permissions: id-token: write; locally, sign with --key)")
	}
	u, err := url.Parse(reqURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("audience", "sigstore")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "bearer "+reqToken)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("OIDC token request: %s", resp.Status)
	}
	var tok struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.Value == "" {
		return "", fmt.Errorf("OIDC token response has no value")
	}
	return tok.Value, nil
}

// buildInfo is what the provenance says about the build.
type buildInfo struct {
	Version, BuilderID, Source, Ref, Commit, Workflow, InvocationID, GoVersion string
}

// githubBuildInfo is the build's facts in a GitHub Actions run (GITHUB_ACTIONS=true): the
// builder is the workflow at its ref (the identity Fulcio certifies for it), the run its
// invocation. Elsewhere it is a local build.
func githubBuildInfo(getenv func(string) string) buildInfo {
	bi := buildInfo{BuilderID: "local", Source: "https://github.com/pool-scheduler/pool-scheduler"}
	if getenv("GITHUB_ACTIONS") != "true" {
		return bi
	}
	server, repo := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY")
	bi.Source = server + "/" + repo
	bi.Ref, bi.Commit = getenv("GITHUB_REF"), getenv("GITHUB_SHA")
	// GITHUB_WORKFLOW_REF: <owner>/<repo>/<workflow path>@<ref>
	if wf := getenv("GITHUB_WORKFLOW_REF"); wf != "" {
		bi.BuilderID = server + "/" + wf
		path, _, _ := strings.Cut(strings.TrimPrefix(wf, repo+"/"), "@")
		bi.Workflow = path
	}
	bi.InvocationID = fmt.Sprintf("%s/%s/actions/runs/%s/attempts/%s", server, repo, getenv("GITHUB_RUN_ID"), getenv("GITHUB_RUN_ATTEMPT"))
	return bi
}

// provenance is the SLSA v1 predicate of a release.
func (bi buildInfo) provenance() (*structpb.Struct, error) {
	ext := map[string]any{"version": bi.Version}
	if bi.Workflow != "" {
		ext["workflow"] = map[string]any{"repository": bi.Source, "path": bi.Workflow, "ref": bi.Ref}
	}
	dep := map[string]any{"uri": "git+" + bi.Source, "digest": map[string]any{"gitCommit": bi.Commit}}
	if bi.Ref != "" {
		dep["uri"] = "git+" + bi.Source + "@" + bi.Ref
	}
	run := map[string]any{"builder": map[string]any{"id": bi.BuilderID}}
	if bi.InvocationID != "" {
		run["metadata"] = map[string]any{"invocationId": bi.InvocationID}
	}
	return structpb.NewStruct(map[string]any{
		"buildDefinition": map[string]any{
			"buildType":            BuildType,
			"externalParameters":   ext,
			"internalParameters":   map[string]any{"goVersion": bi.GoVersion},
			"resolvedDependencies": []any{dep},
		},
		"runDetails": run,
	})
}

// signRelease signs the release in dir (after checking every file against SHA256SUMS) and
// attaches each image's bundles to its layout in layouts. It writes SHA256SUMS.sigstore.json,
// one <image archive>.sigstore.json per release line and provenance.sigstore.json, and returns
// what it wrote.
func signRelease(ctx context.Context, s *signer, dir, repo string, layouts []string, bi buildInfo, created time.Time) ([]string, error) {
	rel, err := readRelease(dir)
	if err != nil {
		return nil, err
	}
	// Each layout to push must be a release image, checked before anything is written.
	layoutImages := map[string]releaseImage{}
	for _, l := range layouts {
		img, err := layoutImage(l)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(rel.Images, func(r releaseImage) bool { return r.Tag == img.Tag })
		if i < 0 || rel.Images[i].Digest != img.Digest {
			return nil, fmt.Errorf("layout %s holds %s@%s, which is not one of the release's images", l, img.Tag, img.Digest)
		}
		layoutImages[l] = rel.Images[i]
	}
	var written []string
	write := func(name string, st *intoto.Statement) ([]byte, error) {
		b, err := s.signStatement(ctx, st)
		if err != nil {
			return nil, fmt.Errorf("signing %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, err
		}
		written = append(written, filepath.Join(dir, name))
		return b, nil
	}
	sumsDigest := sha256.Sum256(rel.SumsData)
	sumsSubject := &intoto.ResourceDescriptor{Name: SumsFile, Digest: map[string]string{"sha256": hex.EncodeToString(sumsDigest[:])}}
	if _, err := write(SumsBundle, &intoto.Statement{Subject: []*intoto.ResourceDescriptor{sumsSubject}, PredicateType: SignPredicateType, Predicate: &structpb.Struct{}}); err != nil {
		return nil, err
	}
	imageBundles := map[string][]byte{}
	for _, img := range rel.Images {
		b, err := write(imageBundleName(img.File), &intoto.Statement{Subject: []*intoto.ResourceDescriptor{img.subject(repo)}, PredicateType: SignPredicateType, Predicate: &structpb.Struct{}})
		if err != nil {
			return nil, err
		}
		imageBundles[img.Tag] = b
	}
	// The provenance names every release file, SHA256SUMS and every image.
	subjects := []*intoto.ResourceDescriptor{sumsSubject}
	for _, name := range rel.Names() {
		subjects = append(subjects, &intoto.ResourceDescriptor{Name: name, Digest: map[string]string{"sha256": rel.Sums[name]}})
	}
	for _, img := range rel.Images {
		subjects = append(subjects, img.subject(repo))
	}
	pred, err := bi.provenance()
	if err != nil {
		return nil, err
	}
	prov, err := write(ProvenanceBundle, &intoto.Statement{Subject: subjects, PredicateType: ProvenancePredicateType, Predicate: pred})
	if err != nil {
		return nil, err
	}
	for _, l := range layouts {
		img := layoutImages[l]
		if err := attachToLayout(l, img, []attachment{
			{bundle: imageBundles[img.Tag], predicateType: SignPredicateType},
			{bundle: prov, predicateType: ProvenancePredicateType},
		}, created); err != nil {
			return nil, fmt.Errorf("layout %s: %w", l, err)
		}
		written = append(written, fmt.Sprintf("%s: signature and provenance attached to %s@%s", l, img.Tag, img.Digest))
	}
	return written, nil
}

// fetchTrustedRoot gets Sigstore's public-good trusted root through its TUF repository.
func fetchTrustedRoot() ([]byte, error) {
	c, err := tuf.New(tuf.DefaultOptions())
	if err != nil {
		return nil, err
	}
	return c.GetTarget("trusted_root.json")
}
