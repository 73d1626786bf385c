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

// Keys of the certificate Secret (cert-controller's layout, plus the CAs of a rotation).
const (
	secretCACert = "ca.crt"
	secretCAKey  = "ca.key"
	// The successor CA, made caOverlap before it signs anything, and the CA it replaced, kept in
	// the caBundle until it expires: a CA rotation never leaves the apiserver trusting no
	// certificate a replica serves (every replica serves what the Secret held when it last read
	// it, and the apiserver learns a new caBundle only after the configuration is written).
	secretNextCACert = "ca-next.crt"
	secretNextCAKey  = "ca-next.key"
	secretPrevCACert = "ca-previous.crt"
	// caOverlap: how long the successor CA is in the caBundle before the serving certificate is
	// signed by it (the apiserver reloads webhook configurations within seconds).
	caOverlap = 24 * time.Hour
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
	whc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	whcErr := k.c.Get(ctx, client.ObjectKey{Name: k.o.WebhookConfiguration}, whc)
	// The successor CA signs the serving certificate only once every webhook's caBundle holds it.
	trusted := whcErr == nil && len(secret.Data[secretNextCACert]) > 0
	for i := range whc.Webhooks {
		trusted = trusted && bytes.Contains(whc.Webhooks[i].ClientConfig.CABundle, secret.Data[secretNextCACert])
	}
	data, changed, err := k.certificates(secret.Data, time.Now(), trusted)
	if err != nil {
		return err
	}
	if changed {
		secret.Data = data
		if err := k.c.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing the certificate to secret %s: %w", k.o.Secret, err)
		}
		logger.Info("Generated the webhook's certificate", "secret", k.o.Secret, "caRotation", len(data[secretNextCACert]) > 0 || len(data[secretPrevCACert]) > 0)
	}
	// The key first: the server's certificate watcher reloads on the certificate file.
	for _, f := range []struct{ name, key string }{{corev1.TLSPrivateKeyKey, corev1.TLSPrivateKeyKey}, {corev1.TLSCertKey, corev1.TLSCertKey}} {
		if err := writeIfChanged(filepath.Join(k.o.CertDir, f.name), data[f.key]); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
	}
	k.writtenOnce.Do(func() { close(k.written) })

	if whcErr != nil {
		k.injected.Store(false)
		return fmt.Errorf("mutatingwebhookconfiguration %s: %w", k.o.WebhookConfiguration, whcErr)
	}
	want := caBundle(data)
	stale := false
	for i := range whc.Webhooks {
		if !bytes.Equal(whc.Webhooks[i].ClientConfig.CABundle, want) {
			whc.Webhooks[i].ClientConfig.CABundle = want
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

// caBundle is what the apiserver must trust: the CA that signs the serving certificate, its
// successor while a rotation overlaps, and its predecessor until that expires.
func caBundle(data map[string][]byte) []byte {
	var b []byte
	for _, key := range []string{secretCACert, secretNextCACert, secretPrevCACert} {
		if v := data[key]; len(v) > 0 {
			b = append(b, v...)
		}
	}
	return b
}

// certificates returns the Secret's data with a CA and a serving certificate valid for
// renewBefore past now, making new ones where they are missing, invalid or expiring. A CA within
// renewBefore of its expiry is rotated with an overlap: its successor is made first (both in the
// caBundle), signs the serving certificate only once nextTrusted (every caBundle holds it) and
// caOverlap has passed, and the old CA stays in the caBundle until it expires. Only a CA that is
// missing, invalid or already expired is replaced at once: then nothing trusted is left to keep.
func (k *certKeeper) certificates(old map[string][]byte, now time.Time, nextTrusted bool) (map[string][]byte, bool, error) {
	data := map[string][]byte{}
	for key, v := range old {
		data[key] = v
	}
	changed := false
	at := now.Add(renewBefore)
	begin := now.Add(-time.Hour) // clock skew between the apiserver and us
	ca, caErr := k.validCA(data[secretCACert], data[secretCAKey], now)
	switch {
	case caErr != nil:
		// Nothing usable: start over (first start, garbage, or a CA that expired unrotated).
		fresh, err := k.gen.CreateCACert(begin, now.Add(caValidity))
		if err != nil {
			return nil, false, err
		}
		ca = fresh
		data[secretCACert], data[secretCAKey] = fresh.CertPEM, fresh.KeyPEM
		for _, key := range []string{secretNextCACert, secretNextCAKey, secretPrevCACert} {
			delete(data, key)
		}
		delete(data, corev1.TLSCertKey)
		changed = true
	case !ca.Cert.NotAfter.After(at):
		// Expiring: rotate with an overlap.
		next, err := k.validCA(data[secretNextCACert], data[secretNextCAKey], now)
		switch {
		case err != nil:
			if next, err = k.gen.CreateCACert(begin, now.Add(caValidity)); err != nil {
				return nil, false, err
			}
			data[secretNextCACert], data[secretNextCAKey] = next.CertPEM, next.KeyPEM
			changed = true
		case nextTrusted && !now.Before(next.Cert.NotBefore.Add(time.Hour+caOverlap)):
			data[secretPrevCACert] = data[secretCACert]
			data[secretCACert], data[secretCAKey] = next.CertPEM, next.KeyPEM
			delete(data, secretNextCACert)
			delete(data, secretNextCAKey)
			delete(data, corev1.TLSCertKey)
			ca = next
			changed = true
		}
	}
	if prev := data[secretPrevCACert]; len(prev) > 0 {
		if certs, err := certutil.ParseCertsPEM(prev); err != nil || len(certs) == 0 || !now.Before(certs[0].NotAfter) {
			delete(data, secretPrevCACert)
			changed = true
		}
	}
	// While a rotation waits for its successor CA, a certificate the current CA signed cannot be
	// valid renewBefore past now (it ends with its CA): valid now is enough until the promotion.
	checkAt := at
	if ca.Cert.NotAfter.Before(at) {
		checkAt = now
	}
	if ok, _ := rotator.ValidCert(data[secretCACert], data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], k.gen.DNSName, k.gen.ExtKeyUsages, checkAt); ok {
		return data, changed, nil
	}
	// Signed for no longer than its CA lives (a serving certificate outliving its CA's successor
	// window would be renewed within renewBefore anyway).
	until := now.Add(certValidity)
	if ca.Cert.NotAfter.Before(until) {
		until = ca.Cert.NotAfter
	}
	cert, key, err := k.gen.CreateCertPEM(ca, begin, until)
	if err != nil {
		return nil, false, err
	}
	data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = cert, key
	return data, true, nil
}

// validCA parses a CA certificate and key that are valid at now (self-signed, key matching).
func (k *certKeeper) validCA(certPEM, keyPEM []byte, now time.Time) (*rotator.KeyPairArtifacts, error) {
	if ok, err := rotator.ValidCert(certPEM, certPEM, keyPEM, k.gen.CAName, nil, now); !ok {
		if err == nil {
			err = errors.New("not valid")
		}
		return nil, fmt.Errorf("no valid CA: %w", err)
	}
	return parseCA(certPEM, keyPEM)
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
