package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// apiServerStartTimeout bounds the wait for /healthz and for the default namespace.
const apiServerStartTimeout = time.Minute

// serviceAccountIssuer is the issuer of the ServiceAccount tokens the apiserver signs (the RBAC
// tests authenticate the scheduler and the labeler with them).
const serviceAccountIssuer = "https://kube-apiserver.pool-scheduler.invalid"

// apiServer is a kube-apiserver running in this process.
type apiServer struct {
	// loopback is the apiserver's own admin client config (a token valid until it stops).
	loopback *rest.Config
	stop     func()
}

// startAPIServer runs kube-apiserver the way its binary does (cmd/kube-apiserver/app), serving
// on a free loopback port with a self-signed certificate, against the etcd in storage. flags are
// kube-apiserver flags, parsed over these defaults; --secure-port and --bind-address are not
// honoured (the listener exists before the flags are parsed). It returns once /healthz is ok and
// the default namespace exists. stop cancels the server, waits for it to finish and removes its
// temporary directory.
//
// This is what k8s.io/kubernetes/cmd/kube-apiserver/app/testing.StartTestServer does, without
// its test dependencies (testing, ktesting, gomega, test/utils: 4.6 MB of Go source that poolctl
// would compile for nothing) and without the front-proxy and client-certificate set-up no user of
// this package needs.
func startAPIServer(storage *storagebackend.Config, flags []string) (_ *apiServer, err error) {
	dir, err := os.MkdirTemp("", "kube-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		listener net.Listener
		done     chan error // nil until the server runs
	)
	stop := func() {
		cancel()
		if done != nil {
			if err := <-done; err != nil {
				klog.ErrorS(err, "kube-apiserver did not shut down cleanly")
			}
		} else if listener != nil {
			_ = listener.Close()
		}
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()

	// Options, feature gates and version registry of its own, as StartTestServer has, so that
	// apiservers started one after the other in a process (tests, restarts) share no option state.
	featureGate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	effectiveVersion := compatibility.DefaultBuildEffectiveVersion()
	effectiveVersion.SetEmulationVersion(featureGate.EmulationVersion())
	registry := basecompatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(basecompatibility.DefaultKubeComponent, effectiveVersion, featureGate); err != nil {
		return nil, err
	}
	s := options.NewServerRunOptions()
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, set := range s.Flags().FlagSets {
		fs.AddFlagSet(set)
	}

	// Port 0: a free port, without a window in which another process could take it.
	listener, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on a loopback port: %w", err)
	}
	addr := listener.Addr().(*net.TCPAddr)
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = addr.Port
	s.SecureServing.ExternalAddress = addr.IP
	// The self-signed serving certificate is generated here.
	s.SecureServing.ServerCert.CertDirectory = dir
	s.ServiceClusterIPRanges = "10.0.0.0/16"
	s.Etcd.StorageConfig = *storage

	keyFile := filepath.Join(dir, "service-account.key")
	if err := writeSigningKey(keyFile); err != nil {
		return nil, err
	}
	s.ServiceAccountSigningKeyFile = keyFile
	s.Authentication.ServiceAccounts.Issuers = []string{serviceAccountIssuer}
	s.Authentication.ServiceAccounts.KeyFiles = []string{keyFile}

	if err := fs.Parse(flags); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := registry.Set(); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	// The apiserver's code reads the process-wide gates, so --feature-gates is applied to them
	// (for the rest of the process, as in the kube-apiserver binary). A gate stays on for later
	// servers of the process: they must serve what it needs (for example the v1beta1
	// runtime-config with MutatingAdmissionPolicy), see Options.Flags.
	for gate := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if want := featureGate.Enabled(gate); want != utilfeature.DefaultFeatureGate.Enabled(gate) {
			if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(gate): want}); err != nil {
				return nil, fmt.Errorf("kube-apiserver --feature-gates: %w", err)
			}
		}
	}

	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	prepared, err := server.PrepareRun()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	done = make(chan error, 1)
	go func() { done <- prepared.Run(ctx) }()

	loopback := rest.CopyConfig(server.GenericAPIServer.LoopbackClientConfig)
	if err := waitUntilServing(loopback, done); err != nil {
		return nil, err
	}
	return &apiServer{loopback: loopback, stop: stop}, nil
}

// waitUntilServing waits until /healthz is ok (which includes every post-start hook: the
// bootstrap RBAC policy, priority classes, CRD informers) and the default namespace exists, or
// the server stopped (done).
func waitUntilServing(cfg *rest.Config, done chan error) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiServerStartTimeout)
	defer cancel()
	var last error
	poll := func(check func(ctx context.Context) error) error {
		return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			select {
			case err := <-done:
				done <- err // for stop
				if err == nil {
					err = errors.New("stopped")
				}
				return false, fmt.Errorf("kube-apiserver exited while starting: %w", err)
			default:
			}
			last = check(ctx)
			return last == nil, nil
		})
	}
	err = poll(func(ctx context.Context) error {
		var status int
		result := client.CoreV1().RESTClient().Get().AbsPath("/healthz").Do(ctx).StatusCode(&status)
		if status != 200 {
			return fmt.Errorf("/healthz: status %d: %w", status, result.Error())
		}
		return nil
	})
	if err == nil {
		err = poll(func(ctx context.Context) error {
			_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return errors.New("default namespace not created yet")
			}
			return err
		})
	}
	if err != nil && last != nil && ctx.Err() != nil {
		return fmt.Errorf("kube-apiserver not ready after %s: %w", apiServerStartTimeout, last)
	}
	return err
}

// writeSigningKey writes a new ECDSA key for ServiceAccount tokens to path.
func writeSigningKey(path string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	pem, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	return keyutil.WriteKey(path, pem)
}
