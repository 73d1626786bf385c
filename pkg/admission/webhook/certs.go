package webhook

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Certificate lifetimes and checks, cert-controller's defaults: a 10-year CA, a 1-year serving
// certificate, renewed when either would expire within 90 days.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	certValidity   = 365 * 24 * time.Hour
	renewBefore    = 90 * 24 * time.Hour
	recheckEvery   = time.Hour
	retryAfterFail = 5 * time.Second
)

// Keys of the certificate Secret (cert-controller's layout).
const (
	secretCACert = "ca.crt"
	secretCAKey  = "ca.key"
)

// certKeeper keeps the webhook's CA and serving certificate in one Secret, the CA in one
// MutatingWebhookConfiguration's caBundle, and the certificate and key in the webhook server's
// directory. It reads and writes only those two objects (its RBAC names them), where
// cert-controller's AddRotator lists every Secret of the namespace; the certificates themselves
// are made and checked by cert-controller's functions (CreateCACert, CreateCertPEM, ValidCert).
// Replicas share the Secret: writes are resourceVersion-checked and a replica that loses reads
// the winner's certificate on the next event.
type certKeeper struct {
	c       client.Client
	o       WebhookOptions
	gen     *rotator.CertRotator
	trigger chan struct{}
	// written closes once the certificate is on disk; injected is set while the caBundle is ours.
	written     chan struct{}
	writtenOnce sync.Once
	injected    atomic.Bool
}

var _ manager.Runnable = &certKeeper{}

func newCertKeeper(mgr manager.Manager, o WebhookOptions) (*certKeeper, error) {
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	k := &certKeeper{
		c: mgr.GetClient(),
		o: o,
		gen: &rotator.CertRotator{CAName: "pool-scheduler-webhook-ca", CAOrganization: "pool-scheduler",
			DNSName: o.DNSName, ExtKeyUsages: &usages},
		trigger: make(chan struct{}, 1),
		written: make(chan struct{}),
	}
	poke := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.poke() },
		UpdateFunc: func(_, _ any) { k.poke() },
		DeleteFunc: func(any) { k.poke() },
	}
	for _, obj := range []client.Object{&corev1.Secret{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(poke); err != nil {
			return nil, err
		}
	}
	return k, mgr.Add(k)
}

func (k *certKeeper) poke() {
	select {
	case k.trigger <- struct{}{}:
	default:
	}
}

// Ready: the certificate is served and the apiserver trusts it.
func (k *certKeeper) Ready() error {
	select {
	case <-k.written:
	default:
		return errors.New("no serving certificate yet")
	}
	if !k.injected.Load() {
		return fmt.Errorf("the CA is not in MutatingWebhookConfiguration %s yet", k.o.WebhookConfiguration)
	}
	return nil
}

// Start keeps the certificates until ctx ends; every replica runs it (no leader election).
func (k *certKeeper) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("certificates")
	tick := time.NewTicker(recheckEvery)
	defer tick.Stop()
	k.poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-k.trigger:
		}
		if err := k.reconcile(ctx, logger); err != nil {
			logger.Error(err, "Keeping the webhook's certificate; retrying", "secret", k.o.Secret, "webhookConfiguration", k.o.WebhookConfiguration)
			time.AfterFunc(retryAfterFail, k.poke)
		}
	}
}

func (k *certKeeper) reconcile(ctx context.Context, logger klog.Logger) error {
	secret := &corev1.Secret{}
	if err := k.c.Get(ctx, k.o.Secret, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("secret %s does not exist: create it empty (the chart and manifests/admission/webhook do)", k.o.Secret)
		}
		return err
	}
	data, changed, err := k.certificates(secret.Data, time.Now())
	if err != nil {
		return err
	}
	if changed {
		secret.Data = data
		if err := k.c.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing the certificate to secret %s: %w", k.o.Secret, err)
		}
		logger.Info("Generated the webhook's certificate", "secret", k.o.Secret)
	}
	// The key first: the server's certificate watcher reloads on the certificate file.
	for _, f := range []struct{ name, key string }{{corev1.TLSPrivateKeyKey, corev1.TLSPrivateKeyKey}, {corev1.TLSCertKey, corev1.TLSCertKey}} {
		if err := writeIfChanged(filepath.Join(k.o.CertDir, f.name), data[f.key]); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
	}
	k.writtenOnce.Do(func() { close(k.written) })

	whc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k.c.Get(ctx, client.ObjectKey{Name: k.o.WebhookConfiguration}, whc); err != nil {
		k.injected.Store(false)
		return fmt.Errorf("mutatingwebhookconfiguration %s: %w", k.o.WebhookConfiguration, err)
	}
	stale := false
	for i := range whc.Webhooks {
		if !bytes.Equal(whc.Webhooks[i].ClientConfig.CABundle, data[secretCACert]) {
			whc.Webhooks[i].ClientConfig.CABundle = data[secretCACert]
			stale = true
		}
	}
	if stale {
		if err := k.c.Update(ctx, whc); err != nil {
			k.injected.Store(false)
			return fmt.Errorf("injecting the CA into mutatingwebhookconfiguration %s: %w", k.o.WebhookConfiguration, err)
		}
		logger.Info("Injected the CA", "webhookConfiguration", k.o.WebhookConfiguration)
	}
	k.injected.Store(true)
	return nil
}

// certificates returns the Secret's data with a CA and a serving certificate valid for
// renewBefore past now, making new ones where they are missing, invalid or expiring.
func (k *certKeeper) certificates(old map[string][]byte, now time.Time) (map[string][]byte, bool, error) {
	data := map[string][]byte{}
	for key, v := range old {
		data[key] = v
	}
	at := now.Add(renewBefore)
	begin := now.Add(-time.Hour) // clock skew between the apiserver and us
	caValid, _ := rotator.ValidCert(data[secretCACert], data[secretCACert], data[secretCAKey], k.gen.CAName, nil, at)
	var ca *rotator.KeyPairArtifacts
	var err error
	if caValid {
		if ca, err = parseCA(data[secretCACert], data[secretCAKey]); err != nil {
			caValid = false
		}
	}
	if !caValid {
		if ca, err = k.gen.CreateCACert(begin, now.Add(caValidity)); err != nil {
			return nil, false, err
		}
		data[secretCACert], data[secretCAKey] = ca.CertPEM, ca.KeyPEM
	}
	if caValid {
		if ok, _ := rotator.ValidCert(data[secretCACert], data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], k.gen.DNSName, k.gen.ExtKeyUsages, at); ok {
			return data, false, nil
		}
	}
	cert, key, err := k.gen.CreateCertPEM(ca, begin, now.Add(certValidity))
	if err != nil {
		return nil, false, err
	}
	data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = cert, key
	return data, true, nil
}

func parseCA(certPEM, keyPEM []byte) (*rotator.KeyPairArtifacts, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("CA key is a %T, not RSA", key)
	}
	return &rotator.KeyPairArtifacts{Cert: certs[0], Key: rsaKey, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// writeIfChanged replaces path atomically (a rename) when its content differs.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
