package labeler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const computeDoc = `{"location":"westeurope","platformFaultDomain":"1","platformUpdateDomain":"4","vmSize":"Standard_D2s_v3"}`

func serveCompute(hits *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Metadata") != "true" {
			http.Error(w, "metadata header missing", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, computeDoc)
	}
}

func testOptions(endpoint string) DomainOptions {
	return DomainOptions{
		NodeName: "n", Endpoint: endpoint,
		UpdateDomainKey: configv1.UpdateDomainLabelKey, FaultDomainKey: configv1.FaultDomainLabelKey,
		RequestTimeout: 2 * time.Second,
		Backoff:        wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 3},
	}
}

// The metadata endpoint is link-local: a proxy configured for the node's egress must never see
// the request. The default transport is pointed at a recording proxy; the domain mode's client
// (HTTPClient nil) must go to the endpoint directly.
func TestFetchDomainsBypassesProxy(t *testing.T) {
	var proxied, direct atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		fmt.Fprint(w, `{"platformFaultDomain":"0","platformUpdateDomain":"0"}`)
	}))
	defer proxy.Close()
	imds := httptest.NewServer(serveCompute(&direct))
	defer imds.Close()

	proxyURL, _ := url.Parse(proxy.URL)
	transport := http.DefaultTransport.(*http.Transport)
	saved := transport.Proxy
	transport.Proxy = http.ProxyURL(proxyURL)
	defer func() { transport.Proxy = saved }()

	d, err := FetchDomains(t.Context(), testOptions(imds.URL+"/metadata/instance/compute"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Domains{FaultDomain: "1", UpdateDomain: "4"}, d); diff != "" {
		t.Errorf("domains (-want +got):\n%s", diff)
	}
	if proxied.Load() != 0 || direct.Load() != 1 {
		t.Errorf("%d requests through the proxy, %d direct; want 0 and 1", proxied.Load(), direct.Load())
	}
}

// A redirect is refused, not followed: the real endpoint never redirects.
func TestFetchDomainsRefusesRedirects(t *testing.T) {
	var target atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("/elsewhere", serveCompute(&target))
	mux.HandleFunc("/metadata/instance/compute", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_, err := FetchDomains(t.Context(), testOptions(srv.URL+"/metadata/instance/compute"))
	if !errors.Is(err, ErrNotAzure) || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("error = %v, want ErrNotAzure naming the redirect", err)
	}
	if target.Load() != 0 {
		t.Errorf("the redirect target was requested %d times", target.Load())
	}
}

// countingTransport counts round trips, then does them with the domain mode's own transport.
type countingTransport struct {
	calls atomic.Int32
	// failed counts the round trips that ended in an error, once they ended: a test that waits
	// for refused attempts must not count one still dialling.
	failed atomic.Int32
	next   http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		c.failed.Add(1)
	}
	return resp, err
}

// Refused at boot (the node's network or the endpoint not up yet) is retried, not taken for
// "not Azure": the endpoint comes up after two refused attempts and the domains are read.
func TestFetchDomainsRetriesRefusedConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: connections are refused

	rt := &countingTransport{next: NewIMDSClient().Transport}
	opts := testOptions("http://" + addr + "/metadata/instance/compute")
	opts.HTTPClient = &http.Client{Transport: rt, CheckRedirect: NewIMDSClient().CheckRedirect}
	opts.Backoff = wait.Backoff{Duration: 20 * time.Millisecond, Factor: 1, Steps: 1000}

	var hits atomic.Int32
	started := make(chan *httptest.Server, 1)
	go func() {
		// Start listening once two attempts were refused.
		_ = wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return rt.failed.Load() >= 2, nil
		})
		srv := httptest.NewUnstartedServer(serveCompute(&hits))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listening on %s again: %v", addr, err)
			started <- nil
			return
		}
		srv.Listener = l
		srv.Start()
		started <- srv
	}()
	d, err := FetchDomains(t.Context(), opts)
	if srv := <-started; srv != nil {
		defer srv.Close()
	}
	if err != nil {
		t.Fatalf("FetchDomains: %v", err)
	}
	if d.UpdateDomain != "4" || hits.Load() != 1 || rt.failed.Load() < 2 {
		t.Errorf("domains %+v after %d attempts (%d refused, %d answered); want update domain 4 after at least 2 refused", d, rt.calls.Load(), rt.failed.Load(), hits.Load())
	}
}

// Nothing answering through every retry is "not Azure" (so --on-not-azure applies).
func TestFetchDomainsRefusedThroughEveryRetry(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rt := &countingTransport{next: NewIMDSClient().Transport}
	opts := testOptions("http://" + addr + "/metadata/instance/compute")
	opts.HTTPClient = &http.Client{Transport: rt}
	_, err = FetchDomains(t.Context(), opts)
	if !errors.Is(err, ErrNotAzure) {
		t.Errorf("error = %v, want ErrNotAzure", err)
	}
	if got := rt.calls.Load(); got != int32(opts.Backoff.Steps) {
		t.Errorf("%d attempts, want %d", got, opts.Backoff.Steps)
	}
}
