package certkeeper

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRunServesWhileFailing: the keeper started while a Secret (the metrics CA copy) and the
// MutatingWebhookConfiguration are missing serves /healthz (ok), /readyz (not ready) and
// /metrics with the error counter from the start, over a self-signed certificate until it has
// written its own; it retries, and once what was missing appears it serves the certificate it
// keeps, injects the bundle and becomes ready. (It used to start its servers only after a first
// successful pass: the liveness probe killed it and nothing reported why.)
func TestRunServesWhileFailing(t *testing.T) {
	wcaSecret := types.NamespacedName{Namespace: "ps", Name: "webhook-ca"}
	wSecret := types.NamespacedName{Namespace: "ps", Name: "webhook-tls"}
	var objs []*corev1.Secret
	for _, nn := range []types.NamespacedName{caSecret, servingSecret, wcaSecret, wSecret} {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}})
	}
	cs := fake.NewClientset(objs[0], objs[1], objs[2], objs[3])
	certDir := t.TempDir()
	k, err := NewKeeper(cs, time.Minute,
		Set{Name: "metrics", CAName: "metrics-ca", CASecret: caSecret, ServingSecret: servingSecret,
			CACopies: []types.NamespacedName{caCopy}, DNSNames: dnsNames, CertDir: certDir},
		Set{Name: "webhook", CAName: "webhook-ca", CASecret: wcaSecret, ServingSecret: wSecret,
			DNSNames: []string{"pool-scheduler-webhook.ps.svc"}, WebhookConfiguration: "pool-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	k.retry = 100 * time.Millisecond
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The manager as cmd/pool-labeler/app builds it for `certs`.
	metrics := metricsserver.Options{BindAddress: metricsAddr, SecureServing: true, CertDir: certDir}
	if err := ServeMetricsFromCertDir(&metrics); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Metrics: metrics, HealthProbeBindAddress: probeAddr})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		t.Fatal(err)
	}
	if err := k.setupWithManager(mgr, Options{Sets: k.sets, Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	var servedP atomic.Pointer[x509.Certificate]
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		VerifyConnection:   func(cs tls.ConnectionState) error { servedP.Store(cs.PeerCertificates[0]); return nil },
	}}}
	get := func(url string) (int, string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	// eventually polls cond for 10 seconds.
	eventually := func(what string, cond func() error) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if err = cond(); err == nil {
				return
			}
		}
		t.Fatalf("%s: %v", what, err)
	}
	status := func(path string, want int) func() error {
		return func() error {
			code, body, err := get("http://" + probeAddr + path)
			if err == nil && code != want {
				err = &statusError{path, code, body}
			}
			return err
		}
	}
	metricsHas := func(lines ...string) func() error {
		return func() error {
			_, body, err := get("https://" + metricsAddr + "/metrics")
			if err != nil {
				return err
			}
			for _, l := range lines {
				if !strings.Contains(body, l) {
					return &missingError{l}
				}
			}
			return nil
		}
	}

	eventually("liveness while failing", status("/healthz", http.StatusOK))
	eventually("readiness while failing", status("/readyz", http.StatusInternalServerError))
	eventually("/metrics while failing", metricsHas(
		`pool_scheduler_certificate_syncs_total{result="error",set="metrics"}`,
		`pool_scheduler_certificate_syncs_total{result="error",set="webhook"}`))
	if served := servedP.Load(); served == nil || strings.Contains(served.Subject.CommonName, dnsNames[0]) {
		t.Errorf("served %v before the metrics certificate could be kept, want the self-signed fallback", served)
	}

	// The CA copy appears: the metrics set is kept, its certificate served; the webhook's
	// configuration is still missing, so not ready, still alive.
	if _, err := cs.CoreV1().Secrets(caCopy.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: caCopy.Namespace, Name: caCopy.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the kept metrics certificate served", func() error {
		if err := metricsHas(`pool_scheduler_certificate_not_after_timestamp_seconds{certificate="serving",secret="` + servingSecret.String() + `"}`)(); err != nil {
			return err
		}
		bundle := secretData(t, cs, caCopy)[CACert]
		return verifies(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servedP.Load().Raw}), time.Now())
	})
	if err := status("/healthz", http.StatusOK)(); err != nil {
		t.Error(err)
	}
	if err := status("/readyz", http.StatusInternalServerError)(); err != nil {
		t.Error(err)
	}

	// The webhook configuration appears: its bundle is injected, the keeper is ready.
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.pool-scheduler.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("ready once every set is kept", status("/readyz", http.StatusOK))
	whc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "pool-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifies2(whc.Webhooks[0].ClientConfig.CABundle, secretData(t, cs, wSecret)[corev1.TLSCertKey], time.Now(), "pool-scheduler-webhook.ps.svc"); err != nil {
		t.Errorf("webhook caBundle: %v", err)
	}
}

type statusError struct {
	path string
	code int
	body string
}

func (e *statusError) Error() string { return e.path + ": " + http.StatusText(e.code) + ": " + e.body }

type missingError struct{ line string }

func (e *missingError) Error() string { return "/metrics lacks " + e.line }
