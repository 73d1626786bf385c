package ociimage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	dockerconfig "github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"helm.sh/helm/v3/pkg/helmpath"
)

// Keychain is where Push finds a registry's credentials: Docker's config (docker login, or
// docker/login-action in CI) and, for a registry it has none for, Helm's registry config
// (`helm registry login`, which needs no Docker engine: the README logs in to ACR that way, with
// `az acr login --expose-token`). The same login then serves the image push and the chart push.
var Keychain = authn.NewMultiKeychain(authn.DefaultKeychain, HelmRegistryKeychain{})

// HelmRegistryKeychain reads the credentials `helm registry login` stores: the file
// $HELM_REGISTRY_CONFIG, by default registry/config.json under Helm's config directory (a Docker
// config file; a credential helper it names is used as Docker would). Path overrides both.
type HelmRegistryKeychain struct{ Path string }

// HelmRegistryConfig is the file `helm registry login` writes, as Helm finds it.
func HelmRegistryConfig() string {
	if p := os.Getenv("HELM_REGISTRY_CONFIG"); p != "" {
		return p
	}
	return helmpath.ConfigPath("registry/config.json")
}

// Resolve implements authn.Keychain: Anonymous where the file or an entry for the registry is
// missing, so that authn.NewMultiKeychain goes on.
func (k HelmRegistryKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	path := k.Path
	if path == "" {
		path = HelmRegistryConfig()
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return authn.Anonymous, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cf, err := dockerconfig.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("helm's registry config %s: %w", path, err)
	}
	cfg, err := cf.GetAuthConfig(target.RegistryStr())
	if err != nil {
		return nil, fmt.Errorf("helm's registry config %s, %s: %w", path, target.RegistryStr(), err)
	}
	cfg.ServerAddress = "" // set by GetAuthConfig; not a credential
	if cfg == (types.AuthConfig{}) {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username:      cfg.Username,
		Password:      cfg.Password,
		Auth:          cfg.Auth,
		IdentityToken: cfg.IdentityToken,
		RegistryToken: cfg.RegistryToken,
	}), nil
}
