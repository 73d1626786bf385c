package certkeeper

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ServeMetricsFromCertDir makes the keeper's own /metrics server, when it serves HTTPS from a
// CertDir (a set's, normally), serve the certificate there, reloaded once the keeper writes it,
// and a self-signed one until then. Call it on the options the manager is built with.
func ServeMetricsFromCertDir(m *metricsserver.Options) error {
	if !m.SecureServing || m.CertDir == "" {
		return nil
	}
	dc, err := newDirCertificate(m.CertDir)
	if err != nil {
		return err
	}
	m.TLSOpts = append(append([]func(*tls.Config){}, m.TLSOpts...), func(c *tls.Config) { c.GetCertificate = dc.get })
	return nil
}

// dirCertificate serves tls.crt and tls.key of a directory the keeper writes, reloaded when they
// change, and a self-signed certificate while they do not exist yet (the keeper's first pass may
// fail: its /metrics must still be served, to report that).
type dirCertificate struct {
	dir      string
	fallback *tls.Certificate
	mu       sync.Mutex
	stamp    [2]time.Time
	cert     *tls.Certificate
}

func newDirCertificate(dir string) (*dirCertificate, error) {
	c, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{{127, 0, 0, 1}}, nil)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(c, key)
	if err != nil {
		return nil, err
	}
	return &dirCertificate{dir: dir, fallback: &pair}, nil
}

func (d *dirCertificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPath, keyPath := filepath.Join(d.dir, corev1.TLSCertKey), filepath.Join(d.dir, corev1.TLSPrivateKeyKey)
	var stamp [2]time.Time
	for i, p := range []string{certPath, keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.cert != nil {
				return d.cert, nil
			}
			return d.fallback, nil
		}
		stamp[i] = fi.ModTime()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cert != nil && stamp == d.stamp {
		return d.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		// Between the two renames: keep what was served.
		if d.cert != nil {
			return d.cert, nil
		}
		return d.fallback, nil
	}
	d.cert, d.stamp = &pair, stamp
	return d.cert, nil
}
