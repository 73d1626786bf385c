package certkeeper

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure `pool-labeler certs`.
type Options struct {
	Sets     []Set
	Interval time.Duration
}

// SetupWithManager adds the keeper of o.Sets to mgr, which cmd/pool-labeler/app builds; its
// metrics and probe servers start first: a pass that fails (a Secret or the webhook
// configuration missing) is logged, counted (pool_scheduler_certificate_syncs_total{result="error"})
// and retried within 10 seconds while /healthz stays ok; /readyz reports whether the last pass
// succeeded.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	k, err := NewKeeper(cs, o.Interval, o.Sets...)
	if err != nil {
		return err
	}
	return k.setupWithManager(mgr, o)
}

func (k *Keeper) setupWithManager(mgr ctrl.Manager, o Options) error {
	for _, s := range o.Sets {
		if s.CertDir != "" {
			if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
		}
	}
	if err := mgr.Add(manager.RunnableFunc(k.Run)); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("certificates", func(*http.Request) error { return k.Ready() })
}

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
