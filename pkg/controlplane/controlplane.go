// Package controlplane runs a real kube-apiserver in process, with pool-scheduler's CRDs
// installed, for the integration and end-to-end tests and for poolctl's simulator.
package controlplane

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pool-scheduler/pool-scheduler/manifests/crds"
)

// ControlPlane is a running kube-apiserver with clients for it.
type ControlPlane struct {
	// Config is an admin client config with QPS and burst high enough for a scheduler under test.
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface

	tearDown func()
}

// Options tune the apiserver.
type Options struct {
	// Flags are extra kube-apiserver flags, for example --authorization-mode=RBAC. Feature gates
	// are process-wide and stay set: the apiservers of one process must all be given the same
	// --feature-gates (and what they need, such as a gate's --runtime-config).
	Flags []string
}

// TB is what Start needs from its caller: a *testing.T, or the standalone control plane's own.
type TB interface {
	Cleanup(func())
	Logf(format string, args ...any)
}

// Start runs kube-apiserver against the etcd in storage, installs the CRDs from manifests/crds
// and waits until they are served. The server stops when tb's cleanup runs or Stop is called.
func Start(tb TB, storage *storagebackend.Config, opts Options) (*ControlPlane, error) {
	flags := append([]string{
		// No endpoints reconciler: there is no real network behind 127.0.0.1 here.
		"--endpoint-reconciler-type=none",
		// No service-account or node-lifecycle controller runs: ServiceAccount admission would refuse
		// every pod and TaintNodesByCondition would leave every node tainted not-ready.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}, opts.Flags...)
	start := time.Now()
	server, err := startAPIServer(storage, flags)
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	tb.Logf("kube-apiserver serving at %s after %s", server.loopback.Host, time.Since(start).Round(time.Millisecond))
	cp := &ControlPlane{tearDown: server.stop}
	tb.Cleanup(cp.Stop)

	cfg := rest.CopyConfig(server.loopback)
	// As scheduler_perf does: the default client limits would hold a scheduler to ~25 pods/s.
	cfg.QPS, cfg.Burst = 5000, 5000
	cp.Config = cfg
	if cp.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, cfg); err != nil {
		return nil, err
	}
	return cp, nil
}

// Stop shuts the apiserver down; it is safe to call more than once.
func (cp *ControlPlane) Stop() {
	if cp.tearDown != nil {
		cp.tearDown()
		cp.tearDown = nil
	}
}

// CRDs returns the CustomResourceDefinitions shipped in manifests/crds.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	err := fs.WalkDir(crds.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || path == "kustomization.yaml" {
			return err
		}
		data, err := crds.FS.ReadFile(path)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("manifests/crds/%s: %w", path, err)
		}
		out = append(out, crd)
		return nil
	})
	return out, err
}

// InstallCRDs creates (or updates) the shipped CRDs and waits until they are served.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	defs, err := CRDs()
	if err != nil {
		return err
	}
	return ApplyCRDs(ctx, cfg, defs...)
}

// ApplyCRDs creates (or updates) CRDs and waits until they are Established and dynamic clients
// can list their resources.
func ApplyCRDs(ctx context.Context, cfg *rest.Config, defs ...*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range defs {
		existing, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	// The discovery behind dynamic clients lags the Established condition slightly.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range defs {
		for _, v := range crd.Spec.Versions {
			gvr := crdGVR(crd, v.Name)
			err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
				return err == nil, nil
			})
			if err != nil {
				return fmt.Errorf("CRD %s not served: %w", crd.Name, err)
			}
		}
	}
	return nil
}

// WriteKubeconfig writes a kubeconfig for cfg to path, for binaries started as child processes.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
		InsecureSkipTLSVerify:    cfg.Insecure,
		// The test apiserver's loopback config verifies a certificate made for this name.
		TLSServerName: cfg.ServerName,
	}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		ClientCertificateData: cfg.CertData,
		ClientCertificate:     cfg.CertFile,
		ClientKeyData:         cfg.KeyData,
		ClientKey:             cfg.KeyFile,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

func crdGVR(crd *apiextensionsv1.CustomResourceDefinition, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
}
