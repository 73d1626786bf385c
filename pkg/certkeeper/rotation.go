// Package certkeeper keeps CAs and the serving certificates they sign, for `pool-labeler certs`:
// the rotation timeline (a CA rotated with an overlap, serving certificates renewed before they
// expire), the CA keys in Secrets of their own, and only the serving certificate and the CA
// bundle in the Secrets that serving pods mount (the metrics servers' and the webhook's) and in
// the webhook configuration's caBundle. It is the one certificate keeper: the webhook serves what
// it writes to its --cert-dir. No scheduler plugin imports it (test/static rooms).
package certkeeper

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Certificate lifetimes and checks, cert-controller's defaults: a 10-year CA, a 1-year serving
// certificate, renewed when either would expire within 90 days.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
	RenewBefore  = 90 * 24 * time.Hour
	// CAOverlap: how long the successor CA is in every CA bundle before the serving certificate
	// is signed by it (the apiserver reloads webhook configurations within seconds, Prometheus
	// its scrape configuration within minutes).
	CAOverlap = 24 * time.Hour
)

// Keys of the data the rotation works on (cert-controller's layout, plus the CAs of a rotation).
const (
	CACert = "ca.crt"
	CAKey  = "ca.key"
	// The successor CA, made CAOverlap before it signs anything, and the CA it replaced, kept in
	// the CA bundle until it expires: a CA rotation never leaves a client trusting no certificate
	// a server serves (every server serves what its Secret held when it last read it, and a
	// client learns a new bundle only after it is written).
	NextCACert = "ca-next.crt"
	NextCAKey  = "ca-next.key"
	PrevCACert = "ca-previous.crt"
)

// CAKeys are the keys that hold CA material (certificates and private keys): what a CA Secret
// holds and a serving Secret must not.
var CAKeys = []string{CACert, CAKey, NextCACert, NextCAKey, PrevCACert}

// Issuer makes and checks one CA and the serving certificate it signs for a set of DNS names.
type Issuer struct {
	gen      *rotator.CertRotator
	dnsNames []string
}

// NewIssuer: caName is the CA's common name; dnsNames the serving certificate's names (the
// first is its subject).
func NewIssuer(caName string, dnsNames ...string) *Issuer {
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	gen := &rotator.CertRotator{CAName: caName, CAOrganization: "pool-scheduler", ExtKeyUsages: &usages}
	if len(dnsNames) > 0 {
		gen.DNSName, gen.ExtraDNSNames = dnsNames[0], dnsNames[1:]
	}
	return &Issuer{gen: gen, dnsNames: dnsNames}
}

// CABundle is what clients must trust: the CA that signs the serving certificate, its successor
// while a rotation overlaps, and its predecessor until that expires.
func CABundle(data map[string][]byte) []byte {
	var b []byte
	for _, key := range []string{CACert, NextCACert, PrevCACert} {
		if v := data[key]; len(v) > 0 {
			b = append(b, v...)
		}
	}
	return b
}

// Certificates returns data (keys CAKeys, tls.crt and tls.key) with a CA and a serving
// certificate valid for RenewBefore past now, making new ones where they are missing, invalid or
// expiring. A CA within RenewBefore of its expiry is rotated with an overlap: its successor is
// made first (both in the CA bundle), signs the serving certificate only once nextTrusted (every
// client's bundle holds it) and CAOverlap has passed, and the old CA stays in the bundle until it
// expires. Only a CA that is missing, invalid or already expired is replaced at once: then
// nothing trusted is left to keep.
func (i *Issuer) Certificates(old map[string][]byte, now time.Time, nextTrusted bool) (map[string][]byte, bool, error) {
	data := map[string][]byte{}
	for key, v := range old {
		data[key] = v
	}
	changed := false
	at := now.Add(RenewBefore)
	begin := now.Add(-time.Hour) // clock skew between the apiserver and us
	ca, caErr := i.validCA(data[CACert], data[CAKey], now)
	switch {
	case caErr != nil:
		// Nothing usable: start over (first start, garbage, or a CA that expired unrotated).
		fresh, err := i.gen.CreateCACert(begin, now.Add(CAValidity))
		if err != nil {
			return nil, false, err
		}
		ca = fresh
		data[CACert], data[CAKey] = fresh.CertPEM, fresh.KeyPEM
		for _, key := range []string{NextCACert, NextCAKey, PrevCACert} {
			delete(data, key)
		}
		delete(data, corev1.TLSCertKey)
		changed = true
	case !ca.Cert.NotAfter.After(at):
		// Expiring: rotate with an overlap.
		next, err := i.validCA(data[NextCACert], data[NextCAKey], now)
		switch {
		case err != nil:
			if next, err = i.gen.CreateCACert(begin, now.Add(CAValidity)); err != nil {
				return nil, false, err
			}
			data[NextCACert], data[NextCAKey] = next.CertPEM, next.KeyPEM
			changed = true
		case nextTrusted && !now.Before(next.Cert.NotBefore.Add(time.Hour+CAOverlap)):
			data[PrevCACert] = data[CACert]
			data[CACert], data[CAKey] = next.CertPEM, next.KeyPEM
			delete(data, NextCACert)
			delete(data, NextCAKey)
			delete(data, corev1.TLSCertKey)
			ca = next
			changed = true
		}
	}
	if prev := data[PrevCACert]; len(prev) > 0 {
		if certs, err := certutil.ParseCertsPEM(prev); err != nil || len(certs) == 0 || !now.Before(certs[0].NotAfter) {
			delete(data, PrevCACert)
			changed = true
		}
	}
	// While a rotation waits for its successor CA, a certificate the current CA signed cannot be
	// valid RenewBefore past now (it ends with its CA): valid now is enough until the promotion.
	checkAt := at
	if ca.Cert.NotAfter.Before(at) {
		checkAt = now
	}
	if ok, _ := rotator.ValidCert(data[CACert], data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], i.gen.DNSName, i.gen.ExtKeyUsages, checkAt); ok && i.coversNames(data[corev1.TLSCertKey]) {
		return data, changed, nil
	}
	// Signed for no longer than its CA lives (a serving certificate outliving its CA's successor
	// window would be renewed within RenewBefore anyway).
	until := now.Add(CertValidity)
	if ca.Cert.NotAfter.Before(until) {
		until = ca.Cert.NotAfter
	}
	cert, key, err := i.gen.CreateCertPEM(ca, begin, until)
	if err != nil {
		return nil, false, err
	}
	data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = cert, key
	return data, true, nil
}

// coversNames: the certificate names every DNS name asked for (ValidCert checks the first only),
// so that a Service added to the list gets a new certificate.
func (i *Issuer) coversNames(certPEM []byte) bool {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return false
	}
	for _, n := range i.dnsNames {
		if !slices.Contains(certs[0].DNSNames, n) {
			return false
		}
	}
	return true
}

// NotAfter is the expiry of the PEM certificate (the first of a bundle); zero if none parses.
func NotAfter(certPEM []byte) time.Time {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return time.Time{}
	}
	return certs[0].NotAfter
}

// validCA parses a CA certificate and key that are valid at now (self-signed, key matching).
func (i *Issuer) validCA(certPEM, keyPEM []byte, now time.Time) (*rotator.KeyPairArtifacts, error) {
	if ok, err := rotator.ValidCert(certPEM, certPEM, keyPEM, i.gen.CAName, nil, now); !ok {
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
