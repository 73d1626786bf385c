package certkeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Set is one CA and the serving certificate it signs. The CA (with its successor and
// predecessor during a rotation) is kept in CASecret, which only the keeper reads; ServingSecret
// gets the serving certificate and key and the CA bundle (tls.crt, tls.key, ca.crt), never a CA
// key; every CACopies Secret gets the CA bundle alone (ca.crt), for clients that must not read
// the serving key. All of them must exist (the chart and the manifests create them empty): the
// keeper gets and updates them by name, which is all its RBAC allows.
type Set struct {
	// Name labels the set's metrics and logs ("metrics").
	Name          string
	CAName        string
	CASecret      types.NamespacedName
	ServingSecret types.NamespacedName
	CACopies      []types.NamespacedName
	DNSNames      []string
	// CertDir, when set, also gets tls.crt and tls.key (the keeper's own /metrics serves them).
	CertDir string
	// WebhookConfiguration, when set, is a MutatingWebhookConfiguration whose webhooks' caBundle
	// the keeper keeps equal to the CA bundle: a client of the serving certificate like the CA
	// copies (the successor CA signs nothing before every caBundle holds it).
	WebhookConfiguration string
}

// Validate names what is missing.
func (s Set) Validate() error {
	var errs []error
	for what, nn := range map[string]types.NamespacedName{"CA Secret": s.CASecret, "serving Secret": s.ServingSecret} {
		if nn.Name == "" || nn.Namespace == "" {
			errs = append(errs, fmt.Errorf("set %s: %s: namespace and name required", s.Name, what))
		}
	}
	if s.CASecret == s.ServingSecret {
		errs = append(errs, fmt.Errorf("set %s: the CA Secret and the serving Secret must differ (the serving pods would read the CA key)", s.Name))
	}
	for _, c := range s.CACopies {
		if c.Name == "" || c.Namespace == "" || c == s.CASecret {
			errs = append(errs, fmt.Errorf("set %s: CA copy %q: namespace and name required, not the CA Secret", s.Name, c))
		}
	}
	if len(s.DNSNames) == 0 {
		errs = append(errs, fmt.Errorf("set %s: at least one DNS name", s.Name))
	}
	return errors.Join(errs...)
}

// Keeper keeps sets of certificates. It runs as one replica; its writes are
// resourceVersion-checked, so a second one (during a rollout) loses and reads the winner's.
type Keeper struct {
	cs    kubernetes.Interface
	sets  []Set
	now   func() time.Time
	every time.Duration
	// retry: how soon a failed pass is retried.
	retry time.Duration
	// last is the error of the last pass over every set (errNoPass before the first).
	last atomic.Pointer[error]
}

var errNoPass = errors.New("certificates not kept yet")

// NewKeeper keeps sets, looking at them every interval (and retrying failures sooner).
func NewKeeper(cs kubernetes.Interface, interval time.Duration, sets ...Set) (*Keeper, error) {
	var errs []error
	for _, s := range sets {
		errs = append(errs, s.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	k := &Keeper{cs: cs, sets: sets, now: time.Now, every: interval, retry: 10 * time.Second}
	k.last.Store(&errNoPass)
	return k, nil
}

// Ready: the last pass over every set succeeded (the Secrets it needs exist and were written).
func (k *Keeper) Ready() error {
	return *k.last.Load()
}

// Run keeps the sets until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("certs")
	for {
		wait := k.every
		if err := k.Sync(ctx); err != nil {
			logger.Error(err, "Keeping certificates; retrying")
			wait = min(wait, k.retry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Sync brings every set up to date once.
func (k *Keeper) Sync(ctx context.Context) error {
	var errs []error
	for _, s := range k.sets {
		err := k.sync(ctx, s)
		result := "success"
		if err != nil {
			result = "error"
			errs = append(errs, fmt.Errorf("set %s: %w", s.Name, err))
		}
		syncs.WithLabelValues(s.Name, result).Inc()
	}
	err := errors.Join(errs...)
	k.last.Store(&err)
	return err
}

func (k *Keeper) sync(ctx context.Context, s Set) error {
	logger := klog.FromContext(ctx).WithValues("set", s.Name)
	get := func(nn types.NamespacedName) (*corev1.Secret, error) {
		sec, err := k.cs.CoreV1().Secrets(nn.Namespace).Get(ctx, nn.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret %s does not exist: create it empty (the chart and the manifests do)", nn)
		}
		return sec, err
	}
	caSecret, err := get(s.CASecret)
	if err != nil {
		return err
	}
	serving, err := get(s.ServingSecret)
	if err != nil {
		return err
	}
	copies := make([]*corev1.Secret, len(s.CACopies))
	for i, nn := range s.CACopies {
		if copies[i], err = get(nn); err != nil {
			return err
		}
	}
	var whc *admissionregistrationv1.MutatingWebhookConfiguration
	if s.WebhookConfiguration != "" {
		if whc, err = k.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, s.WebhookConfiguration, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("mutatingwebhookconfiguration %s: %w", s.WebhookConfiguration, err)
		}
	}
	// A serving Secret that still holds a CA key (a process that kept its own CA there, as the
	// webhook's own rotation did before this keeper replaced it) hands its CA over while the CA
	// Secret is empty, so the clients' bundles stay valid; the key leaves the serving Secret
	// below.
	caSource := caSecret.Data
	if len(caSource[CACert]) == 0 && len(serving.Data[CAKey]) > 0 {
		caSource = serving.Data
		logger.Info("Taking over the CA kept in the serving Secret", "from", s.ServingSecret, "to", s.CASecret)
	}
	// The successor CA signs the serving certificate only once every bundle a client reads
	// holds it.
	next := caSource[NextCACert]
	trusted := len(next) > 0 && bytes.Contains(serving.Data[CACert], next)
	for _, c := range copies {
		trusted = trusted && bytes.Contains(c.Data[CACert], next)
	}
	if whc != nil {
		for _, w := range whc.Webhooks {
			trusted = trusted && bytes.Contains(w.ClientConfig.CABundle, next)
		}
	}
	data := map[string][]byte{}
	for _, key := range CAKeys {
		if v, ok := caSource[key]; ok {
			data[key] = v
		}
	}
	for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if v, ok := serving.Data[key]; ok {
			data[key] = v
		}
	}
	data, _, err = NewIssuer(s.CAName, s.DNSNames...).Certificates(data, k.now(), trusted)
	if err != nil {
		return err
	}
	// The CA first: a serving certificate is never written whose CA could be lost.
	caData := map[string][]byte{}
	for _, key := range CAKeys {
		if v, ok := data[key]; ok {
			caData[key] = v
		}
	}
	if err := k.update(ctx, caSecret, caData); err != nil {
		return err
	}
	bundle := CABundle(data)
	// Every client's bundle before the serving certificate: a serving pod may load a certificate
	// as soon as it is written, and one signed by a CA no client trusts yet (a new CA: the first
	// install, a CA Secret emptied) would fail every call until the bundle follows. The bundle
	// drops no CA that signed a certificate still valid (a predecessor leaves it once expired).
	for _, c := range copies {
		if err := k.update(ctx, c, map[string][]byte{CACert: bundle}); err != nil {
			return err
		}
	}
	if whc != nil {
		stale := false
		for i := range whc.Webhooks {
			if !bytes.Equal(whc.Webhooks[i].ClientConfig.CABundle, bundle) {
				whc.Webhooks[i].ClientConfig.CABundle = bundle
				stale = true
			}
		}
		if stale {
			if _, err := k.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, whc, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("injecting the CA bundle into mutatingwebhookconfiguration %s: %w", s.WebhookConfiguration, err)
			}
			logger.Info("Injected the CA bundle", "webhookConfiguration", s.WebhookConfiguration)
		}
	}
	// Serving pods mount tls.crt and tls.key (the kubelet updates the files; the servers reload
	// them); ca.crt is the bundle their clients verify with.
	if err := k.update(ctx, serving, map[string][]byte{
		corev1.TLSCertKey: data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: data[corev1.TLSPrivateKeyKey], CACert: bundle,
	}); err != nil {
		return err
	}
	if s.CertDir != "" {
		for _, key := range []string{corev1.TLSPrivateKeyKey, corev1.TLSCertKey} {
			if err := WriteIfChanged(filepath.Join(s.CertDir, key), data[key]); err != nil {
				return err
			}
		}
	}
	notAfter.WithLabelValues(s.ServingSecret.String(), "serving").Set(float64(NotAfter(data[corev1.TLSCertKey]).Unix()))
	notAfter.WithLabelValues(s.CASecret.String(), "ca").Set(float64(NotAfter(data[CACert]).Unix()))
	logger.V(4).Info("Certificates kept", "servingNotAfter", NotAfter(data[corev1.TLSCertKey]))
	return nil
}

// update writes want as the whole data of sec when it differs (resourceVersion-checked). Keys
// not in want are removed: a serving Secret that held a CA key (an older chart) loses it.
func (k *Keeper) update(ctx context.Context, sec *corev1.Secret, want map[string][]byte) error {
	if maps.EqualFunc(sec.Data, want, bytes.Equal) {
		return nil
	}
	sec = sec.DeepCopy()
	sec.Data = want
	if _, err := k.cs.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing secret %s/%s: %w", sec.Namespace, sec.Name, err)
	}
	klog.FromContext(ctx).Info("Wrote certificates", "secret", sec.Namespace+"/"+sec.Name, "keys", slices.Sorted(maps.Keys(want)))
	return nil
}

// WriteIfChanged replaces path atomically (a rename) when its content differs.
func WriteIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
