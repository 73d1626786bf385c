package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/pool-scheduler/pool-scheduler/pkg/certkeeper"
)

// How often the keeper looks at the certificates without an event, and how soon it retries.
const (
	recheckEvery   = time.Hour
	retryAfterFail = 5 * time.Second
)

// certKeeper keeps the webhook's CA and serving certificate in one Secret, the CA in one
// MutatingWebhookConfiguration's caBundle, and the certificate and key in the webhook server's
// directory. It reads and writes only those two objects (its RBAC names them), where
// cert-controller's AddRotator lists every Secret of the namespace; the certificates themselves
// are made and checked by certkeeper (cert-controller's CreateCACert, CreateCertPEM, ValidCert).
// Replicas share the Secret: writes are resourceVersion-checked and a replica that loses reads
// the winner's certificate on the next event.
type certKeeper struct {
	c       client.Client
	o       WebhookOptions
	issuer  *certkeeper.Issuer
	trigger chan struct{}
	// written closes once the certificate is on disk; injected is set while the caBundle is ours.
	written     chan struct{}
	writtenOnce sync.Once
	injected    atomic.Bool
}

var _ manager.Runnable = &certKeeper{}

func newCertKeeper(mgr manager.Manager, o WebhookOptions) (*certKeeper, error) {
	k := &certKeeper{
		c:       mgr.GetClient(),
		o:       o,
		issuer:  certkeeper.NewIssuer("pool-scheduler-webhook-ca", o.DNSName),
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
	trusted := whcErr == nil && len(secret.Data[certkeeper.NextCACert]) > 0
	for i := range whc.Webhooks {
		trusted = trusted && bytes.Contains(whc.Webhooks[i].ClientConfig.CABundle, secret.Data[certkeeper.NextCACert])
	}
	data, changed, err := k.issuer.Certificates(secret.Data, time.Now(), trusted)
	if err != nil {
		return err
	}
	if changed {
		secret.Data = data
		if err := k.c.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing the certificate to secret %s: %w", k.o.Secret, err)
		}
		logger.Info("Generated the webhook's certificate", "secret", k.o.Secret, "caRotation", len(data[certkeeper.NextCACert]) > 0 || len(data[certkeeper.PrevCACert]) > 0)
	}
	// The key first: the server's certificate watcher reloads on the certificate file.
	for _, f := range []struct{ name, key string }{{corev1.TLSPrivateKeyKey, corev1.TLSPrivateKeyKey}, {corev1.TLSCertKey, corev1.TLSCertKey}} {
		if err := certkeeper.WriteIfChanged(filepath.Join(k.o.CertDir, f.name), data[f.key]); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
	}
	k.writtenOnce.Do(func() { close(k.written) })

	if whcErr != nil {
		k.injected.Store(false)
		return fmt.Errorf("mutatingwebhookconfiguration %s: %w", k.o.WebhookConfiguration, whcErr)
	}
	want := certkeeper.CABundle(data)
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
