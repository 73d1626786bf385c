package certkeeper

import (
	"bytes"
	"crypto/x509"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
)

// TestCertificates: an empty Secret gets a CA and a serving certificate for the Service's name;
// valid ones are kept; a certificate within the renewal window is renewed under the same CA,
// and an expiring CA is replaced with everything signed by it.
func TestCertificates(t *testing.T) {
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	k := NewIssuer("ca", "svc.ns.svc")
	now := time.Now()
	valid := func(data map[string][]byte, at time.Time) bool {
		ok, _ := rotator.ValidCert(data[CACert], data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], "svc.ns.svc", &usages, at)
		return ok
	}

	first, changed, err := k.Certificates(nil, now, false)
	if err != nil || !changed {
		t.Fatalf("empty Secret: changed %v, err %v; want new certificates", changed, err)
	}
	if !valid(first, now) {
		t.Fatal("the new serving certificate does not verify against the new CA for the Service's name")
	}
	again, changed, err := k.Certificates(first, now.Add(24*time.Hour), false)
	if err != nil || changed || !bytes.Equal(again[corev1.TLSCertKey], first[corev1.TLSCertKey]) {
		t.Errorf("valid certificates replaced (changed %v, err %v)", changed, err)
	}
	// Ten months on, the 1-year certificate is within 90 days of expiry: renewed, same CA.
	later := now.Add(300 * 24 * time.Hour)
	renewed, changed, err := k.Certificates(first, later, false)
	if err != nil || !changed || bytes.Equal(renewed[corev1.TLSCertKey], first[corev1.TLSCertKey]) {
		t.Fatalf("expiring certificate kept (changed %v, err %v)", changed, err)
	}
	if !bytes.Equal(renewed[CACert], first[CACert]) {
		t.Error("the CA was replaced although it is valid for years: the apiserver's caBundle would change for nothing")
	}
	if !valid(renewed, later) {
		t.Error("the renewed certificate does not verify")
	}
	// Ten years on the CA itself expires: a new CA and certificate.
	decade := now.Add(10 * 365 * 24 * time.Hour)
	fresh, changed, err := k.Certificates(renewed, decade, false)
	if err != nil || !changed || bytes.Equal(fresh[CACert], first[CACert]) || !valid(fresh, decade) {
		t.Errorf("expiring CA not replaced with a working one (changed %v, err %v)", changed, err)
	}
	// Garbage in the Secret is replaced, not an error.
	if _, changed, err := k.Certificates(map[string][]byte{CACert: []byte("x"), CAKey: []byte("y")}, now, false); err != nil || !changed {
		t.Errorf("garbage Secret: changed %v, err %v", changed, err)
	}
}

// TestCARotationOverlaps walks a CA through its rotation: at every step the certificate each
// replica may still serve (the one before the step and the one after it) verifies against the
// caBundle the apiserver holds at that step, so no admission review fails for trust.
func TestCARotationOverlaps(t *testing.T) {
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	k := NewIssuer("ca", "svc.ns.svc")
	start := time.Now()
	verifies := func(bundle, certPEM []byte, at time.Time) error {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return errors.New("empty caBundle")
		}
		certs, err := certutil.ParseCertsPEM(certPEM)
		if err != nil {
			return err
		}
		_, err = certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "svc.ns.svc", CurrentTime: at, KeyUsages: usages})
		return err
	}
	data, _, err := k.Certificates(nil, start, false)
	if err != nil {
		t.Fatal(err)
	}
	firstCA := data[CACert]
	// Ten years and more (the CA expires at day 3650; its rotation starts 90 days before): a
	// check every ten days, every day from day 3500, as the keeper's hourly recheck would find
	// them. Each step: the apiserver holds the previous step's caBundle while the Secret
	// changes, then the new one.
	apiserverBundle := CABundle(data)
	served := data[corev1.TLSCertKey]
	var madeNext, promoted, droppedPrev bool
	for day := 10; day <= 3700; day += map[bool]int{true: 1, false: 10}[day >= 3500] {
		now := start.Add(time.Duration(day) * 24 * time.Hour)
		trusted := len(data[NextCACert]) > 0 && bytes.Contains(apiserverBundle, data[NextCACert])
		next, changed, err := k.Certificates(data, now, trusted)
		if err != nil {
			t.Fatalf("day %d: %v", day, err)
		}
		// The new certificate against the caBundle the apiserver still has (a replica may serve
		// it before the configuration is written), and the old one against the new caBundle.
		if err := verifies(apiserverBundle, next[corev1.TLSCertKey], now); err != nil {
			t.Fatalf("day %d: the new serving certificate is not trusted by the caBundle the apiserver holds: %v", day, err)
		}
		if err := verifies(CABundle(next), served, now); err != nil && day < 3650 {
			t.Fatalf("day %d: a replica still serving the previous certificate is not trusted by the new caBundle: %v", day, err)
		}
		if changed {
			madeNext = madeNext || len(next[NextCACert]) > 0
			if !bytes.Equal(next[CACert], data[CACert]) {
				promoted = true
				if !bytes.Equal(next[PrevCACert], firstCA) {
					t.Fatalf("day %d: the CA was replaced without keeping the old one in the caBundle", day)
				}
			}
			droppedPrev = droppedPrev || (len(data[PrevCACert]) > 0 && len(next[PrevCACert]) == 0)
		}
		data, served, apiserverBundle = next, next[corev1.TLSCertKey], CABundle(next)
		if err := verifies(apiserverBundle, served, now); err != nil {
			t.Fatalf("day %d: the served certificate does not verify against the caBundle: %v", day, err)
		}
	}
	if !madeNext || !promoted || !droppedPrev {
		t.Errorf("rotation incomplete: successor made %v, promoted %v, old CA dropped after it expired %v", madeNext, promoted, droppedPrev)
	}
	// The successor does not sign anything while the caBundle lacks it.
	at := start.Add(3600 * 24 * time.Hour)
	pending, _, err := k.Certificates(map[string][]byte{}, start, false)
	if err != nil {
		t.Fatal(err)
	}
	pending, _, _ = k.Certificates(pending, at, false)
	for day := 0; day < 5; day++ {
		kept, _, err := k.Certificates(pending, at.Add(time.Duration(day)*24*time.Hour), false)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(kept[CACert], pending[NextCACert]) {
			t.Fatalf("day %d: the successor CA was promoted though no caBundle holds it", day)
		}
	}
}

// TestCertificatesFollowDNSNames: a certificate that lacks a name now asked for (a Service added
// to the keeper's list) is replaced under the same CA; one that holds every name is kept.
func TestCertificatesFollowDNSNames(t *testing.T) {
	now := time.Now()
	first, _, err := NewIssuer("ca", "a.ns.svc").Certificates(nil, now, false)
	if err != nil {
		t.Fatal(err)
	}
	both := NewIssuer("ca", "a.ns.svc", "b.ns.svc")
	next, changed, err := both.Certificates(first, now, false)
	if err != nil || !changed || !bytes.Equal(next[CACert], first[CACert]) {
		t.Fatalf("added name: changed %v, err %v, same CA %v; want a new certificate under the same CA", changed, err, bytes.Equal(next[CACert], first[CACert]))
	}
	certs, _ := certutil.ParseCertsPEM(next[corev1.TLSCertKey])
	if len(certs) == 0 || !slices.Equal(certs[0].DNSNames, []string{"a.ns.svc", "b.ns.svc"}) {
		t.Fatalf("certificate names %v, want both", certs)
	}
	if _, changed, _ := both.Certificates(next, now, false); changed {
		t.Error("a certificate holding every name was replaced")
	}
}
