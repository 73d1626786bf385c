package webhook

import (
	"bytes"
	"crypto/x509"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
)

// TestCertificates: an empty Secret gets a CA and a serving certificate for the Service's name;
// valid ones are kept; a certificate within the renewal window is renewed under the same CA,
// and an expiring CA is replaced with everything signed by it.
func TestCertificates(t *testing.T) {
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	k := &certKeeper{gen: &rotator.CertRotator{CAName: "ca", CAOrganization: "o", DNSName: "svc.ns.svc", ExtKeyUsages: &usages}}
	now := time.Now()
	valid := func(data map[string][]byte, at time.Time) bool {
		ok, _ := rotator.ValidCert(data[secretCACert], data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], "svc.ns.svc", &usages, at)
		return ok
	}

	first, changed, err := k.certificates(nil, now)
	if err != nil || !changed {
		t.Fatalf("empty Secret: changed %v, err %v; want new certificates", changed, err)
	}
	if !valid(first, now) {
		t.Fatal("the new serving certificate does not verify against the new CA for the Service's name")
	}
	again, changed, err := k.certificates(first, now.Add(24*time.Hour))
	if err != nil || changed || !bytes.Equal(again[corev1.TLSCertKey], first[corev1.TLSCertKey]) {
		t.Errorf("valid certificates replaced (changed %v, err %v)", changed, err)
	}
	// Ten months on, the 1-year certificate is within 90 days of expiry: renewed, same CA.
	later := now.Add(300 * 24 * time.Hour)
	renewed, changed, err := k.certificates(first, later)
	if err != nil || !changed || bytes.Equal(renewed[corev1.TLSCertKey], first[corev1.TLSCertKey]) {
		t.Fatalf("expiring certificate kept (changed %v, err %v)", changed, err)
	}
	if !bytes.Equal(renewed[secretCACert], first[secretCACert]) {
		t.Error("the CA was replaced although it is valid for years: the apiserver's caBundle would change for nothing")
	}
	if !valid(renewed, later) {
		t.Error("the renewed certificate does not verify")
	}
	// Ten years on the CA itself expires: a new CA and certificate.
	decade := now.Add(10 * 365 * 24 * time.Hour)
	fresh, changed, err := k.certificates(renewed, decade)
	if err != nil || !changed || bytes.Equal(fresh[secretCACert], first[secretCACert]) || !valid(fresh, decade) {
		t.Errorf("expiring CA not replaced with a working one (changed %v, err %v)", changed, err)
	}
	// Garbage in the Secret is replaced, not an error.
	if _, changed, err := k.certificates(map[string][]byte{secretCACert: []byte("x"), secretCAKey: []byte("y")}, now); err != nil || !changed {
		t.Errorf("garbage Secret: changed %v, err %v", changed, err)
	}
}
