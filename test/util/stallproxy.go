package util

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// StallProxy stands between one client (a scheduler process) and kube-apiserver, and can stall
// that client's watches of one resource: the bytes of a stalled watch (events and bookmarks)
// are held, its connection stays open, everything else flows. It is a watch that stops
// delivering, as a wedged informer or a half-dead connection behind a load balancer shows it.
// Resumed, the held bytes flow again and the client catches up.
type StallProxy struct {
	server *httptest.Server

	mu      sync.Mutex
	stalled map[string]chan struct{} // path of a collection -> closed on resume
}

// StartStallProxy proxies to cp with cp's own credentials; Kubeconfig is the client's.
func StartStallProxy(t testing.TB, cp *controlplane.ControlPlane) *StallProxy {
	t.Helper()
	target, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &StallProxy{stalled: map[string]chan struct{}{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			resp.Body = &stallReader{ReadCloser: resp.Body, ctx: r.Context(), gate: func() <-chan struct{} { return p.gate(r.URL.Path) }}
		}
		return nil
	}
	p.server = httptest.NewTLSServer(rp)
	t.Cleanup(p.server.Close)
	return p
}

// Kubeconfig writes a kubeconfig that reaches kube-apiserver through the proxy.
func (p *StallProxy) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig-proxied")
	if err := controlplane.WriteKubeconfig(&rest.Config{Host: p.server.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Stall holds the watches of a collection (its path, e.g. /api/v1/nodes) from now on.
func (p *StallProxy) Stall(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.stalled[path]; !ok {
		p.stalled[path] = make(chan struct{})
	}
}

// Resume lets the held bytes of path's watches flow again.
func (p *StallProxy) Resume(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, ok := p.stalled[path]; ok {
		close(ch)
		delete(p.stalled, path)
	}
}

// gate returns a channel that is closed unless path's watches are stalled (nil: not stalled).
func (p *StallProxy) gate(path string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	for prefix, ch := range p.stalled {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return ch
		}
	}
	return nil
}

// stallReader holds what it read while its gate is stalled.
type stallReader struct {
	io.ReadCloser
	ctx  context.Context
	gate func() <-chan struct{}
}

func (s *stallReader) Read(b []byte) (int, error) {
	n, err := s.ReadCloser.Read(b)
	if ch := s.gate(); ch != nil {
		select {
		case <-ch:
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	return n, err
}
