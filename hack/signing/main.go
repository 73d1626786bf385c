// Command signing signs and verifies pool-scheduler releases with Sigstore bundles (v0.3): the
// release files through SHA256SUMS, every release line's image (its image index digest), and the
// build provenance (SLSA v1) of both. It works on files only (the release directory `make
// release` writes, the OCI image layouts `make push-image` pushes) and on a registry for
// verification, so it is a module of its own: sigstore-go's dependencies (gRPC, OpenTelemetry,
// protobuf) would fight the main module's Kubernetes pins. The Makefile runs it (make
// release-key, make sign-release, make verify-release); docs/security.md, "Verifying a release",
// describes the trust model.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmds := map[string]func(context.Context, []string) error{
		"keygen":       keygenCmd,
		"sign":         signCmd,
		"verify":       verifyCmd,
		"trusted-root": trustedRootCmd,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		usage()
	}
	if err := run(context.Background(), os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "signing %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: signing <command> [flags]   (-h after a command lists its flags)
  keygen        write an ECDSA P-256 key pair (PEM) for key-based signing
  sign          sign a release directory and its image layouts (--key, or --keyless in GitHub Actions)
  verify        verify a release directory offline, its image layouts, and images in a registry
  trusted-root  fetch Sigstore's public-good trusted root (TUF) for offline keyless verification`)
	os.Exit(2)
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func keygenCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ExitOnError)
	out := fs.String("out", "release", "write <out>.key (private, mode 0600) and <out>.pub")
	_ = fs.Parse(args)
	priv, pub, err := generateKeyPair()
	if err != nil {
		return err
	}
	if _, err := os.Stat(*out + ".key"); err == nil {
		return fmt.Errorf("%s.key exists; not overwriting a key", *out)
	}
	if err := os.WriteFile(*out+".key", priv, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(*out+".pub", pub, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s.key (keep it private) and %s.pub\n", *out, *out)
	return nil
}

func signCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sign", flag.ExitOnError)
	dir := fs.String("release-dir", "", "release directory (make release): SHA256SUMS and the files it lists")
	var layouts stringList
	fs.Var(&layouts, "layout", "OCI image layout of a release line (repeatable); the image's bundles are added to it as referrers, for make push-image")
	repo := fs.String("repository", "ghcr.io/pool-scheduler/pool-scheduler", "image repository, the subject name of image statements")
	key := fs.String("key", "", "PEM ECDSA P-256 private key (make release-key); or --keyless")
	keyless := fs.Bool("keyless", false, "sign with a Fulcio certificate for the GitHub Actions OIDC identity, logged in Rekor")
	fulcioURL := fs.String("fulcio-url", "https://fulcio.sigstore.dev", "Fulcio (--keyless)")
	rekorURL := fs.String("rekor-url", "https://rekor.sigstore.dev", "Rekor (--keyless)")
	// In GitHub Actions the build's facts default to the run's (githubBuildInfo).
	bi := githubBuildInfo(os.Getenv)
	fs.StringVar(&bi.Version, "version", "", "release version")
	fs.StringVar(&bi.BuilderID, "builder-id", bi.BuilderID, "SLSA builder id (in GitHub Actions: the workflow, https://github.com/<repo>/<workflow path>@<ref>)")
	fs.StringVar(&bi.Source, "source", bi.Source, "source repository URL")
	fs.StringVar(&bi.Ref, "ref", bi.Ref, "source ref built (e.g. refs/tags/v1.2.3)")
	fs.StringVar(&bi.Commit, "commit", bi.Commit, "full source commit built")
	fs.StringVar(&bi.Workflow, "workflow", bi.Workflow, "workflow path (e.g. .github/workflows/release.yaml), empty locally")
	fs.StringVar(&bi.InvocationID, "invocation-id", bi.InvocationID, "the build's run URL")
	fs.StringVar(&bi.GoVersion, "go-version", runtime.Version(), "Go toolchain that built the release")
	_ = fs.Parse(args)
	if *dir == "" || bi.Version == "" || bi.Commit == "" {
		return fmt.Errorf("--release-dir, --version and --commit are required")
	}
	var s *signer
	var err error
	switch {
	case *key != "" && *keyless:
		return fmt.Errorf("--key and --keyless exclude each other")
	case *key != "":
		s, err = keySignerFromFile(*key)
	case *keyless:
		var token string
		if token, err = githubIDToken(ctx, http.DefaultClient); err == nil {
			s, err = keylessSigner(token, *fulcioURL, *rekorURL)
		}
	default:
		return fmt.Errorf("--key <private.pem> or --keyless is required")
	}
	if err != nil {
		return err
	}
	written, err := signRelease(ctx, s, *dir, *repo, layouts, bi, time.Now().UTC())
	if err != nil {
		return err
	}
	for _, w := range written {
		fmt.Println(w)
	}
	return nil
}

func verifyCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	var o verifyOptions
	fs.StringVar(&o.ReleaseDir, "release-dir", "", "release directory: SHA256SUMS, its bundle, every file, image bundles, provenance")
	fs.Var((*stringList)(&o.Layouts), "layout", "also check the bundles attached to this OCI image layout (repeatable)")
	fs.Var((*stringList)(&o.Images), "image", "also check this image in a registry (repository:tag, repeatable): digest as released, signature and provenance referrers")
	fs.StringVar(&o.Repository, "repository", "ghcr.io/pool-scheduler/pool-scheduler", "image repository the release names its images by")
	key := fs.String("key", "", "PEM public key (key-based releases)")
	trustedRoot := fs.String("trusted-root", "", "Sigstore trusted_root.json (keyless releases; signing trusted-root fetches it)")
	identity := fs.String("certificate-identity", "", "keyless: the signer's identity, the workflow https://github.com/<repo>/.github/workflows/release.yaml@refs/tags/<version>")
	identityRegexp := fs.String("certificate-identity-regexp", "", "keyless: the signer's identity as a regular expression")
	issuer := fs.String("certificate-oidc-issuer", githubIssuer, "keyless: the OIDC issuer of the signer's identity")
	requireSCT := fs.Bool("require-sct", true, "keyless: require the certificate's CT log timestamp")
	_ = fs.Parse(args)
	if o.ReleaseDir == "" {
		return fmt.Errorf("--release-dir is required")
	}
	var err error
	switch {
	case *key != "" && *trustedRoot != "":
		return fmt.Errorf("--key and --trusted-root exclude each other")
	case *key != "":
		o.Verifier, err = keyVerifierFromFile(*key)
	case *trustedRoot != "":
		o.Verifier, err = keylessVerifierFromFile(*trustedRoot, *identity, *identityRegexp, *issuer, *requireSCT)
	default:
		return fmt.Errorf("--key <public.pem> or --trusted-root <trusted_root.json> is required")
	}
	if err != nil {
		return err
	}
	// Public images need no credentials; private ones take docker login's.
	o.Remote = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	rep, err := verifyRelease(o)
	if err != nil {
		return err
	}
	fmt.Print(rep)
	return nil
}

func trustedRootCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("trusted-root", flag.ExitOnError)
	out := fs.String("out", "trusted_root.json", "file to write")
	_ = fs.Parse(args)
	data, err := fetchTrustedRoot()
	if err != nil {
		return err
	}
	return os.WriteFile(*out, data, 0o644)
}
