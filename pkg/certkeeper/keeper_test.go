package certkeeper

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
)

var (
	caSecret      = types.NamespacedName{Namespace: "ps", Name: "metrics-ca"}
	servingSecret = types.NamespacedName{Namespace: "ps", Name: "metrics-tls"}
	caCopy        = types.NamespacedName{Namespace: "ps-metrics", Name: "metrics-ca"}
	dnsNames      = []string{"pool-scheduler.ps.svc", "pool-labeler.ps.svc"}
)

func newTestKeeper(t *testing.T) (*Keeper, *fake.Clientset, *time.Time) {
	t.Helper()
	var objs []corev1.Secret
	for _, nn := range []types.NamespacedName{caSecret, servingSecret, caCopy} {
		objs = append(objs, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}})
	}
	cs := fake.NewClientset(&objs[0], &objs[1], &objs[2])
	k, err := NewKeeper(cs, time.Minute, Set{Name: "metrics", CAName: "metrics-ca", CASecret: caSecret, ServingSecret: servingSecret,
		CACopies: []types.NamespacedName{caCopy}, DNSNames: dnsNames, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	k.now = func() time.Time { return now }
	return k, cs, &now
}

func secretData(t *testing.T, cs *fake.Clientset, nn types.NamespacedName) map[string][]byte {
	t.Helper()
	s, err := cs.CoreV1().Secrets(nn.Namespace).Get(context.Background(), nn.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// verifies: certPEM is valid at at for every DNS name, against bundle.
func verifies(bundle, certPEM []byte, at time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return errors.New("empty CA bundle")
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return err
	}
	for _, n := range dnsNames {
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: n, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
	}
	return nil
}

// TestKeeperKeepsCAKeysApart: the CA key is written to the CA Secret only; the serving Secret
// gets the certificate, its key and the CA bundle; the copy the CA bundle alone. A serving
// Secret that held a CA key (the chart's former layout) loses it.
func TestKeeperKeepsCAKeysApart(t *testing.T) {
	k, cs, now := newTestKeeper(t)
	ctx := context.Background()
	if err := k.Ready(); err == nil {
		t.Error("ready before the first sync")
	}
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k.Ready(); err != nil {
		t.Error(err)
	}
	ca, serving, cp := secretData(t, cs, caSecret), secretData(t, cs, servingSecret), secretData(t, cs, caCopy)
	if got := slices.Sorted(maps.Keys(ca)); !slices.Equal(got, []string{"ca.crt", "ca.key"}) {
		t.Errorf("CA Secret keys %v, want ca.crt ca.key", got)
	}
	if got := slices.Sorted(maps.Keys(serving)); !slices.Equal(got, []string{"ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("serving Secret keys %v, want ca.crt tls.crt tls.key", got)
	}
	if got := slices.Sorted(maps.Keys(cp)); !slices.Equal(got, []string{"ca.crt"}) {
		t.Errorf("CA copy keys %v, want ca.crt", got)
	}
	for name, d := range map[string]map[string][]byte{"serving": serving, "copy": cp} {
		for _, v := range d {
			if bytes.Contains(v, []byte("PRIVATE KEY")) && !bytes.Equal(v, serving["tls.key"]) {
				t.Errorf("%s Secret holds a private key other than the serving key", name)
			}
		}
	}
	if _, err := tls.X509KeyPair(serving["tls.crt"], serving["tls.key"]); err != nil {
		t.Error(err)
	}
	if err := verifies(cp["ca.crt"], serving["tls.crt"], *now); err != nil {
		t.Errorf("the serving certificate does not verify against the CA copy: %v", err)
	}
	if got, want := testutil.ToFloat64(notAfter.WithLabelValues(servingSecret.String(), "serving")), float64(NotAfter(serving["tls.crt"]).Unix()); got != want || got == 0 {
		t.Errorf("serving notAfter metric %v, want %v", got, want)
	}
	// Nothing changes while it is valid.
	s, _ := cs.CoreV1().Secrets(servingSecret.Namespace).Get(ctx, servingSecret.Name, metav1.GetOptions{})
	rv := s.ResourceVersion
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _ := cs.CoreV1().Secrets(servingSecret.Namespace).Get(ctx, servingSecret.Name, metav1.GetOptions{}); s.ResourceVersion != rv {
		t.Error("a valid serving Secret was rewritten")
	}
	// A CA key in the serving Secret is removed; the certificate is kept.
	s.Data["ca.key"] = ca["ca.key"]
	if _, err := cs.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := secretData(t, cs, servingSecret); got["ca.key"] != nil || !bytes.Equal(got["tls.crt"], serving["tls.crt"]) {
		t.Errorf("serving Secret after a CA key was put in it: keys %v, same certificate %v", slices.Sorted(maps.Keys(got)), bytes.Equal(got["tls.crt"], serving["tls.crt"]))
	}
}

// TestKeeperNeedsItsSecrets: a missing Secret is an error naming it (the keeper cannot create
// Secrets); nothing is written before.
func TestKeeperNeedsItsSecrets(t *testing.T) {
	k, cs, _ := newTestKeeper(t)
	if err := cs.CoreV1().Secrets(caCopy.Namespace).Delete(context.Background(), caCopy.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := k.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), caCopy.String()) {
		t.Errorf("missing CA copy: err %v, want one naming %s", err, caCopy)
	}
	if len(secretData(t, cs, caSecret)) != 0 || k.Ready() == nil {
		t.Error("wrote the CA or became ready although a Secret is missing")
	}
	if _, err := NewKeeper(cs, time.Minute, Set{Name: "x", CAName: "x", CASecret: caSecret, ServingSecret: caSecret, DNSNames: dnsNames}); err == nil {
		t.Error("a set whose serving Secret is its CA Secret was accepted")
	}
}

// TestKeeperRotationOverlaps walks the keeper through the serving certificate's renewals and the
// CA's rotation over more than ten years. At each step the scrapers hold the CA bundle of the
// step before (Prometheus reloads a changed Secret later), and the serving pods may serve the
// certificate of the step before (the kubelet updates mounted Secrets later): both
// combinations must verify, so no scrape fails for trust.
func TestKeeperRotationOverlaps(t *testing.T) {
	k, cs, now := newTestKeeper(t)
	ctx := context.Background()
	start := *now
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	firstCA := secretData(t, cs, caSecret)["ca.crt"]
	served, scraperBundle := secretData(t, cs, servingSecret)["tls.crt"], secretData(t, cs, caCopy)["ca.crt"]
	renewals, promoted := 0, false
	for day := 1; day <= 3700; day += map[bool]int{true: 1, false: 5}[day >= 3500] {
		*now = start.Add(time.Duration(day) * 24 * time.Hour)
		if err := k.Sync(ctx); err != nil {
			t.Fatalf("day %d: %v", day, err)
		}
		serving, cp := secretData(t, cs, servingSecret), secretData(t, cs, caCopy)
		if !bytes.Equal(serving["ca.crt"], cp["ca.crt"]) {
			t.Fatalf("day %d: the serving Secret's and the copy's CA bundles differ", day)
		}
		for what, pair := range map[string][2][]byte{
			"the new certificate against the scrapers' previous bundle": {scraperBundle, serving["tls.crt"]},
			"the previous certificate against the new bundle":           {cp["ca.crt"], served},
			"the new certificate against the new bundle":                {cp["ca.crt"], serving["tls.crt"]},
		} {
			if err := verifies(pair[0], pair[1], *now); err != nil && !(what == "the previous certificate against the new bundle" && !now.Before(NotAfter(served))) {
				t.Fatalf("day %d: %s: %v", day, what, err)
			}
		}
		if !bytes.Equal(serving["tls.crt"], served) {
			renewals++
		}
		if ca := secretData(t, cs, caSecret)["ca.crt"]; !bytes.Equal(ca, firstCA) {
			promoted = true
		}
		served, scraperBundle = serving["tls.crt"], cp["ca.crt"]
		if left := NotAfter(served).Sub(*now); left < 30*24*time.Hour {
			t.Fatalf("day %d: the serving certificate expires in %s (renewed 90 days before)", day, left)
		}
	}
	// 1-year certificates over ten years, renewed 90 days early: at least ten renewals.
	if renewals < 10 || !promoted {
		t.Errorf("%d renewals, CA promoted %v; want >= 10 and a promoted successor", renewals, promoted)
	}
}

// TestKeeperWebhookConfiguration: a webhook's Secret in the layout the webhook keeps itself (CA,
// CA key and serving certificate together) hands its CA over to the CA Secret, so the caBundle
// the apiserver holds stays valid, and loses the CA key; the keeper keeps every webhook's
// caBundle equal to the bundle, and a successor CA signs nothing while one caBundle lacks it.
func TestKeeperWebhookConfiguration(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	old, _, err := NewIssuer("pool-scheduler-webhook-ca", "pool-scheduler-webhook.ps.svc").Certificates(nil, now, false)
	if err != nil {
		t.Fatal(err)
	}
	wcaSecret := types.NamespacedName{Namespace: "ps", Name: "webhook-ca"}
	wSecret := types.NamespacedName{Namespace: "ps", Name: "webhook-tls"}
	whc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.pool-scheduler.io"}, {Name: "b.pool-scheduler.io"}}}
	for i := range whc.Webhooks {
		whc.Webhooks[i].ClientConfig.CABundle = CABundle(old)
	}
	cs := fake.NewClientset(whc,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ps", Name: "webhook-ca"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ps", Name: "webhook-tls"}, Data: old})
	k, err := NewKeeper(cs, time.Minute, Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", CASecret: wcaSecret, ServingSecret: wSecret,
		DNSNames: []string{"pool-scheduler-webhook.ps.svc"}, WebhookConfiguration: "pool-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	k.now = func() time.Time { return now }
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ca, serving := secretData(t, cs, wcaSecret), secretData(t, cs, wSecret)
	if !bytes.Equal(ca["ca.crt"], old["ca.crt"]) || !bytes.Equal(ca["ca.key"], old["ca.key"]) {
		t.Error("the CA of the webhook's Secret was not taken over")
	}
	if serving["ca.key"] != nil || !bytes.Equal(serving["tls.crt"], old["tls.crt"]) {
		t.Errorf("serving Secret after the take-over: keys %v, same certificate %v; want no CA key, the valid certificate kept", slices.Sorted(maps.Keys(serving)), bytes.Equal(serving["tls.crt"], old["tls.crt"]))
	}
	bundles := func() [][]byte {
		got, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "pool-scheduler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, w := range got.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		return out
	}
	// Near the CA's expiry: a successor in every caBundle.
	now = now.Add(CAValidity - 80*24*time.Hour)
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	next := secretData(t, cs, wcaSecret)["ca-next.crt"]
	for i, b := range bundles() {
		if len(next) == 0 || !bytes.Contains(b, next) || !bytes.Contains(b, old["ca.crt"]) {
			t.Fatalf("webhook %d caBundle does not hold both CAs during the rotation", i)
		}
	}
	// One caBundle loses the successor (someone rewrote it): two days on, no promotion in that
	// pass; the keeper writes it back, and the next pass promotes.
	got, _ := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "pool-scheduler", metav1.GetOptions{})
	got.Webhooks[1].ClientConfig.CABundle = old["ca.crt"]
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(48 * time.Hour)
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ca := secretData(t, cs, wcaSecret)["ca.crt"]; !bytes.Equal(ca, old["ca.crt"]) {
		t.Fatal("the successor CA was promoted while a caBundle lacked it")
	}
	if b := bundles()[1]; !bytes.Contains(b, next) {
		t.Fatal("the caBundle was not written back")
	}
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := secretData(t, cs, wcaSecret)
	if !bytes.Equal(promoted["ca.crt"], next) || !bytes.Equal(promoted["ca-previous.crt"], old["ca.crt"]) {
		t.Fatal("the successor CA was not promoted once every caBundle held it")
	}
	for i, b := range bundles() {
		if !bytes.Equal(b, secretData(t, cs, wSecret)["ca.crt"]) {
			t.Errorf("webhook %d caBundle differs from the serving Secret's bundle", i)
		}
		if err := verifies2(b, secretData(t, cs, wSecret)["tls.crt"], now, "pool-scheduler-webhook.ps.svc"); err != nil {
			t.Errorf("webhook %d: the serving certificate does not verify against its caBundle: %v", i, err)
		}
	}
}

func verifies2(bundle, certPEM []byte, at time.Time, name string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return errors.New("empty CA bundle")
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return err
	}
	_, err = certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}
