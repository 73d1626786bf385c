package main

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// verifier checks bundles against trusted material (a public key, or Sigstore's roots) and a
// policy (the key, or the signer's certificate identity).
type verifier struct {
	v      *verify.Verifier
	policy verify.PolicyOption
	what   string
}

func keyVerifier(pubPEM []byte) (*verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the public key: %w", err)
	}
	sv, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	// A key has no certificate to be valid at a time, so no timestamp is needed.
	v, err := verify.NewVerifier(tm, verify.WithNoObserverTimestamps())
	if err != nil {
		return nil, err
	}
	return &verifier{v: v, policy: verify.WithKey(), what: "the release key"}, nil
}

func keyVerifierFromFile(path string) (*verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return keyVerifier(data)
}

// keylessVerifier checks bundles signed with a Fulcio certificate: chained to the trusted
// root, logged in Rekor (the bundle's entry, its signed timestamp or inclusion proof checked
// offline against the log keys of the trusted root), valid when logged, with the given identity
// (SAN, exact or a regular expression) and OIDC issuer.
func keylessVerifier(tm root.TrustedMaterial, identity, identityRegexp, issuer string, requireSCT bool) (*verifier, error) {
	if identity == "" && identityRegexp == "" {
		return nil, fmt.Errorf("keyless verification needs --certificate-identity (or -regexp): whose signature to accept")
	}
	if issuer == "" {
		return nil, fmt.Errorf("keyless verification needs --certificate-oidc-issuer")
	}
	id, err := verify.NewShortCertificateIdentity(issuer, "", identity, identityRegexp)
	if err != nil {
		return nil, err
	}
	opts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	if requireSCT {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	v, err := verify.NewVerifier(tm, opts...)
	if err != nil {
		return nil, err
	}
	return &verifier{v: v, policy: verify.WithCertificateIdentity(id), what: "identity " + identity + identityRegexp + " of " + issuer}, nil
}

func keylessVerifierFromFile(path, identity, identityRegexp, issuer string, requireSCT bool) (*verifier, error) {
	tr, err := root.NewTrustedRootFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("trusted root %s: %w", path, err)
	}
	return keylessVerifier(tr, identity, identityRegexp, issuer, requireSCT)
}

// statement verifies a bundle of an in-toto statement with predicateType, one of whose subjects
// has digest, and returns the statement.
func (v *verifier) statement(data []byte, digest v1.Hash, predicateType string) (*intoto.Statement, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	raw, err := hex.DecodeString(digest.Hex)
	if err != nil {
		return nil, err
	}
	res, err := v.v.Verify(&b, verify.NewPolicy(verify.WithArtifactDigest(digest.Algorithm, raw), v.policy))
	if err != nil {
		return nil, fmt.Errorf("not signed by %s, or not for %s: %w", v.what, digest, err)
	}
	if res.Statement == nil {
		return nil, fmt.Errorf("the bundle holds no in-toto statement")
	}
	if res.Statement.GetPredicateType() != predicateType {
		return nil, fmt.Errorf("predicate %q, want %q", res.Statement.GetPredicateType(), predicateType)
	}
	return res.Statement, nil
}

// verifyOptions says what verifyRelease checks and with what.
type verifyOptions struct {
	ReleaseDir string
	Layouts    []string
	Images     []string
	Repository string
	Verifier   *verifier
	Remote     []remote.Option
}

func readBundle(dir, name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing: the release is not signed", name)
	}
	return data, err
}

// verifyRelease checks a signed release: SHA256SUMS's signature, every file against it, each
// image's signature and the provenance naming every file and image; then each layout's and
// each registry image's attached signature and provenance, their image being a release image.
// It returns a summary of what it checked.
func verifyRelease(o verifyOptions) (string, error) {
	var rep strings.Builder
	dir := o.ReleaseDir
	data, err := readBundle(dir, SumsBundle)
	if err != nil {
		return "", err
	}
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return "", err
	}
	sumsDigest := sha256Hash(sums)
	if _, err := o.Verifier.statement(data, sumsDigest, SignPredicateType); err != nil {
		return "", fmt.Errorf("%s: %w", SumsBundle, err)
	}
	rel, err := readRelease(dir)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&rep, "%s: signed by %s; %d files match it\n", SumsFile, o.Verifier.what, len(rel.Sums))
	images := map[string]releaseImage{}
	for _, img := range rel.Images {
		name := imageBundleName(img.File)
		data, err := readBundle(dir, name)
		if err != nil {
			return "", err
		}
		st, err := o.Verifier.statement(data, img.Digest, SignPredicateType)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		if err := hasSubject(st, img.subject(o.Repository).GetName(), img.Digest); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		images[img.Tag] = img
		fmt.Fprintf(&rep, "image %s:%s@%s: signed\n", o.Repository, img.Tag, img.Digest)
	}
	data, err = readBundle(dir, ProvenanceBundle)
	if err != nil {
		return "", err
	}
	prov, err := o.Verifier.statement(data, sumsDigest, ProvenancePredicateType)
	if err != nil {
		return "", fmt.Errorf("%s: %w", ProvenanceBundle, err)
	}
	for _, n := range rel.Names() {
		if err := hasSubject(prov, n, v1.Hash{Algorithm: "sha256", Hex: rel.Sums[n]}); err != nil {
			return "", fmt.Errorf("%s: %w", ProvenanceBundle, err)
		}
	}
	for _, img := range rel.Images {
		if err := hasSubject(prov, img.subject(o.Repository).GetName(), img.Digest); err != nil {
			return "", fmt.Errorf("%s: %w", ProvenanceBundle, err)
		}
	}
	fmt.Fprintf(&rep, "provenance: %s, built by %s from %s\n", ProvenancePredicateType, builderID(prov), sourceOf(prov))

	checkAttached := func(where string, img releaseImage, bs []attachedBundle) error {
		want, ok := images[img.Tag]
		if !ok {
			return fmt.Errorf("%s: %s is not a release image", where, img.Tag)
		}
		if img.Digest != want.Digest {
			return fmt.Errorf("%s: image %s is %s, the release's is %s", where, img.Tag, img.Digest, want.Digest)
		}
		var signed, proven bool
		var errs []error
		for _, b := range bs {
			if b.Subject != img.Digest {
				continue
			}
			switch b.PredicateType {
			case SignPredicateType, ProvenancePredicateType:
				if _, err := o.Verifier.statement(b.Data, img.Digest, b.PredicateType); err != nil {
					errs = append(errs, fmt.Errorf("%s bundle: %w", b.PredicateType, err))
					continue
				}
				signed = signed || b.PredicateType == SignPredicateType
				proven = proven || b.PredicateType == ProvenancePredicateType
			}
		}
		if !signed || !proven {
			return fmt.Errorf("%s: image %s@%s: signature attached: %t, provenance attached: %t %w", where, img.Tag, img.Digest, signed, proven, errors.Join(errs...))
		}
		fmt.Fprintf(&rep, "%s: %s@%s: signature and provenance attached and verified\n", where, img.Tag, img.Digest)
		return nil
	}
	for _, l := range o.Layouts {
		img, bs, err := layoutAttached(l)
		if err != nil {
			return "", err
		}
		if err := checkAttached(l, img, bs); err != nil {
			return "", err
		}
	}
	for _, ref := range o.Images {
		d, bs, err := registryAttached(ref, o.Remote...)
		if err != nil {
			return "", err
		}
		_, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
		if err := checkAttached(ref, releaseImage{Tag: tag, Digest: d}, bs); err != nil {
			return "", err
		}
	}
	return rep.String(), nil
}

func sha256Hash(data []byte) v1.Hash {
	s := sha256.Sum256(data)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// hasSubject checks that st names name with digest.
func hasSubject(st *intoto.Statement, name string, digest v1.Hash) error {
	for _, s := range st.GetSubject() {
		if s.GetName() == name {
			if s.GetDigest()[digest.Algorithm] != digest.Hex {
				return fmt.Errorf("subject %s has digest %v, want %s", name, s.GetDigest(), digest)
			}
			return nil
		}
	}
	return fmt.Errorf("no subject %s", name)
}

func builderID(st *intoto.Statement) string {
	return st.GetPredicate().GetFields()["runDetails"].GetStructValue().GetFields()["builder"].GetStructValue().GetFields()["id"].GetStringValue()
}

func sourceOf(st *intoto.Statement) string {
	deps := st.GetPredicate().GetFields()["buildDefinition"].GetStructValue().GetFields()["resolvedDependencies"].GetListValue().GetValues()
	if len(deps) == 0 {
		return "(no source)"
	}
	f := deps[0].GetStructValue().GetFields()
	return f["uri"].GetStringValue() + " " + f["digest"].GetStructValue().GetFields()["gitCommit"].GetStringValue()
}
