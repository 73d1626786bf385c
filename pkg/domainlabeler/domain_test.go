package domainlabeler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
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

func TestIsAzureProviderID(t *testing.T) {
	tests := []struct {
		providerID string
		want       bool
	}{
		{"azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-np-vmss/virtualMachines/0", true},
		{"Azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-0", true},
		{"AZURE://x", true},
		{"azure:/x", false},
		{"aws:///eu-west-1a/i-0123456789abcdef0", false},
		{"gce://project/europe-west1-b/node-0", false},
		{"kind://docker/kind/kind-worker", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsAzureProviderID(tt.providerID); got != tt.want {
			t.Errorf("IsAzureProviderID(%q) = %v, want %v", tt.providerID, got, tt.want)
		}
	}
}

const azureProviderID = "azure:///subscriptions/s/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-np-vmss/virtualMachines/0"

// closedEndpoint is a metadata URL where nothing listens: connections are refused.
func closedEndpoint(t *testing.T) (endpoint, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	return "http://" + addr + "/metadata/instance/compute", addr
}

// droppingEndpoint accepts connections and never answers, as a request whose packets are dropped
// (AKS IMDS restriction) times out.
func droppingEndpoint(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(srv.Close)
	return srv.URL + "/metadata/instance/compute"
}

func failingEndpoint(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/metadata/instance/compute"
}

type eventSummary struct {
	Type, Reason, Kind, Name string
	Count                    int32
}

func nodeEvents(t *testing.T, cs kubernetes.Interface) ([]eventSummary, []string) {
	t.Helper()
	list, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventSummary
	var messages []string
	for _, e := range list.Items {
		out = append(out, eventSummary{Type: e.Type, Reason: e.Reason, Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name, Count: e.Count})
		messages = append(messages, e.Message)
	}
	return out, messages
}

// reachableSeries is the metadata-reachable gauge's value, or -1 when it has no series.
func reachableSeries(t *testing.T) float64 {
	t.Helper()
	if testutil.CollectAndCount(domainMetadataReachable) == 0 {
		return -1
	}
	return testutil.ToFloat64(domainMetadataReachable.WithLabelValues())
}

// Nothing answering means "not Azure" only where the node does not say otherwise: on an Azure VM
// (spec.providerID azure://) the endpoint is there and this pod cannot reach it (AKS IMDS
// restriction, a network policy), which the node must show, not hide behind "not Azure".
func TestRunDomainModeNoAnswer(t *testing.T) {
	tests := []struct {
		name       string
		providerID string
		noNode     bool // the node cannot be read
		endpoint   func(t *testing.T) string
		// errors.Is targets the result must and must not match
		wantIs, wantNot []error
		wantResult      string // the domainLabelings result counted
		wantEvents      []eventSummary
		wantGauge       float64 // -1: no series
	}{{
		name: "Azure node, refused: unreachable, not 'not Azure'", providerID: azureProviderID,
		endpoint:   func(t *testing.T) string { e, _ := closedEndpoint(t); return e },
		wantIs:     []error{ErrMetadataUnreachable},
		wantNot:    []error{ErrNotAzure},
		wantResult: "metadata_unreachable",
		wantEvents: []eventSummary{{Type: "Warning", Reason: ReasonMetadataUnreachable, Kind: "Node", Name: "n", Count: 1}},
		wantGauge:  0,
	}, {
		name: "Azure node (any case), packets dropped: timeouts are unreachable too", providerID: "Azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-0",
		endpoint:   droppingEndpoint,
		wantIs:     []error{ErrMetadataUnreachable},
		wantNot:    []error{ErrNotAzure},
		wantResult: "metadata_unreachable",
		wantEvents: []eventSummary{{Type: "Warning", Reason: ReasonMetadataUnreachable, Kind: "Node", Name: "n", Count: 1}},
		wantGauge:  0,
	}, {
		name: "another provider, refused: not Azure, as before", providerID: "aws:///eu-west-1a/i-0123456789abcdef0",
		endpoint:   func(t *testing.T) string { e, _ := closedEndpoint(t); return e },
		wantIs:     []error{ErrNotAzure},
		wantNot:    []error{ErrMetadataUnreachable},
		wantResult: "not_azure",
		wantGauge:  -1,
	}, {
		name:       "no providerID yet, refused: not Azure, as before",
		endpoint:   func(t *testing.T) string { e, _ := closedEndpoint(t); return e },
		wantIs:     []error{ErrNotAzure},
		wantNot:    []error{ErrMetadataUnreachable},
		wantResult: "not_azure",
		wantGauge:  -1,
	}, {
		name: "another provider, timed out: gives up, as before", providerID: "gce://project/europe-west1-b/node-0",
		endpoint:   droppingEndpoint,
		wantNot:    []error{ErrNotAzure, ErrMetadataUnreachable},
		wantResult: "error",
		wantGauge:  -1,
	}, {
		name: "Azure node, server errors: something answered, not unreachable", providerID: azureProviderID,
		endpoint:   failingEndpoint,
		wantNot:    []error{ErrNotAzure, ErrMetadataUnreachable},
		wantResult: "error",
		wantGauge:  -1,
	}, {
		name: "node unreadable: no verdict on a guess", noNode: true,
		endpoint:   func(t *testing.T) string { e, _ := closedEndpoint(t); return e },
		wantNot:    []error{ErrNotAzure, ErrMetadataUnreachable},
		wantResult: "error",
		wantGauge:  -1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if !tt.noNode {
				cs = fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "uid-n"}, Spec: corev1.NodeSpec{ProviderID: tt.providerID}})
			}
			domainMetadataReachable.Reset()
			before := testutil.ToFloat64(domainLabelings.WithLabelValues(tt.wantResult))
			opts := testOptions(tt.endpoint(t))
			opts.RequestTimeout = 100 * time.Millisecond

			err := RunDomainMode(t.Context(), cs, opts, time.Hour)
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("error = %v, want %v", err, target)
				}
			}
			for _, target := range tt.wantNot {
				if errors.Is(err, target) {
					t.Errorf("error = %v, must not be %v", err, target)
				}
			}
			if tt.noNode && (err == nil || !strings.Contains(err.Error(), "spec.providerID")) {
				t.Errorf("error = %v, want one naming spec.providerID", err)
			}
			if got := testutil.ToFloat64(domainLabelings.WithLabelValues(tt.wantResult)) - before; got != 1 {
				t.Errorf("%s counted %v times, want 1", tt.wantResult, got)
			}
			if got := reachableSeries(t); got != tt.wantGauge {
				t.Errorf("pool_labeler_domain_metadata_reachable = %v, want %v (-1: no series)", got, tt.wantGauge)
			}
			events, messages := nodeEvents(t, cs)
			if diff := cmp.Diff(tt.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// The event says what failed, why it likely did and how to fix it.
			for _, msg := range messages {
				t.Logf("event message: %s", msg)
				for _, want := range []string{opts.Endpoint, "nothing answered after 3 attempts", "--enable-imds-restriction", "NetworkPolicy", "labeler.domain.hostNetwork=true", "169.254.169.254/32 TCP port 80"} {
					if !strings.Contains(msg, want) {
						t.Errorf("event message lacks %q:\n%s", want, msg)
					}
				}
				if len(msg) > 1024 {
					t.Errorf("event message has %d bytes, more than an Event may", len(msg))
				}
			}
		})
	}
}

// An Azure node whose endpoint is blocked keeps probing every reprobe interval, keeping one
// Warning fresh, and is labelled as usual once the endpoint answers (the gauge flips, and a
// Normal event says so).
func TestRunDomainModeUnreachableThenReachable(t *testing.T) {
	endpoint, addr := closedEndpoint(t)
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "uid-n"}, Spec: corev1.NodeSpec{ProviderID: azureProviderID}})
	domainMetadataReachable.Reset()
	opts := testOptions(endpoint)
	opts.ReprobeInterval = 20 * time.Millisecond

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- RunDomainMode(ctx, cs, opts, time.Hour) }()

	// Two probe rounds: the same Warning, counted twice.
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		events, _ := nodeEvents(t, cs)
		return len(events) == 1 && events[0].Count >= 2, nil
	})
	if err != nil {
		events, _ := nodeEvents(t, cs)
		t.Fatalf("no repeated %s warning: %v", ReasonMetadataUnreachable, events)
	}
	if got := reachableSeries(t); got != 0 {
		t.Errorf("pool_labeler_domain_metadata_reachable = %v while unreachable, want 0", got)
	}

	var hits atomic.Int32
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(serveCompute(&hits))
	srv.Listener = l
	srv.Start()
	defer srv.Close()

	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
		return err == nil && n.Labels[configv1.UpdateDomainLabelKey] == "4" && n.Labels[configv1.FaultDomainLabelKey] == "1", nil
	})
	if err != nil {
		n, _ := cs.CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{})
		t.Fatalf("node not labelled once the endpoint answered: %v", n.Labels)
	}
	if got := reachableSeries(t); got != 1 {
		t.Errorf("pool_labeler_domain_metadata_reachable = %v once read, want 1", got)
	}
	events, _ := nodeEvents(t, cs)
	var reasons []string
	for _, e := range events {
		reasons = append(reasons, e.Type+" "+e.Reason)
	}
	sort.Strings(reasons)
	if diff := cmp.Diff([]string{"Normal " + ReasonMetadataReachable, "Warning " + ReasonMetadataUnreachable}, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunDomainMode returned %v after labelling", err)
	}
}

// stallingEndpoint never answers its first answerAfter requests (they time out, as when packets
// are dropped), then serves the compute document (answerAfter < 0: never).
func stallingEndpoint(t *testing.T, answerAfter int32) string {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := hits.Add(1); answerAfter < 0 || n <= answerAfter {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, computeDoc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metadata/instance/compute"
}

// Ending ctx in the middle of a probe round (during its metadata request or its node read) is
// shutting down, not a failure: RunDomainMode returns the verdict of the last completed round (nil
// when none completed), counts no error for the cut-short round and writes no Event for it.
func TestRunDomainModeCancelledMidRound(t *testing.T) {
	tests := []struct {
		name string
		// cutInRequest: ctx ends during this metadata request (1-based; 3 per round);
		// cutInNodeRead: during this node read (one per round).
		cutInRequest, cutInNodeRead int32
		wantUnreachable             bool // the result is ErrMetadataUnreachable; else nil
		wantRounds                  float64
	}{
		{name: "during the second round's metadata request", cutInRequest: 5, wantUnreachable: true, wantRounds: 1},
		{name: "during the second round's node read", cutInNodeRead: 2, wantUnreachable: true, wantRounds: 1},
		{name: "during the first round's metadata request", cutInRequest: 2, wantRounds: 0},
		{name: "during the first round's node read", cutInNodeRead: 1, wantRounds: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "uid-n"}, Spec: corev1.NodeSpec{ProviderID: azureProviderID}})
			var reads atomic.Int32
			cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if reads.Add(1) == tt.cutInNodeRead {
					cancel()
					return true, nil, context.Canceled
				}
				return false, nil, nil
			})
			opts := testOptions(stallingEndpoint(t, -1))
			if tt.cutInRequest > 0 {
				var requests atomic.Int32
				opts.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if requests.Add(1) == tt.cutInRequest {
						cancel()
					}
					return http.DefaultTransport.RoundTrip(r)
				})}
			}
			opts.RequestTimeout = 50 * time.Millisecond
			opts.ReprobeInterval = 10 * time.Millisecond
			before := map[string]float64{}
			for _, result := range []string{"error", "metadata_unreachable"} {
				before[result] = testutil.ToFloat64(domainLabelings.WithLabelValues(result))
			}

			err := RunDomainMode(ctx, cs, opts, time.Hour)
			if tt.wantUnreachable && !errors.Is(err, ErrMetadataUnreachable) {
				t.Errorf("RunDomainMode = %v, want the last completed round's ErrMetadataUnreachable", err)
			}
			if !tt.wantUnreachable && err != nil {
				t.Errorf("RunDomainMode = %v, want nil: no round completed", err)
			}
			if got := testutil.ToFloat64(domainLabelings.WithLabelValues("error")) - before["error"]; got != 0 {
				t.Errorf("result=error counted %v times for a cancellation, want 0", got)
			}
			if got := testutil.ToFloat64(domainLabelings.WithLabelValues("metadata_unreachable")) - before["metadata_unreachable"]; got != tt.wantRounds {
				t.Errorf("result=metadata_unreachable counted %v times, want %v (the completed rounds)", got, tt.wantRounds)
			}
			events, _ := nodeEvents(t, cs)
			var want []eventSummary
			if tt.wantRounds > 0 {
				want = []eventSummary{{Type: "Warning", Reason: ReasonMetadataUnreachable, Kind: "Node", Name: "n", Count: int32(tt.wantRounds)}}
			}
			if diff := cmp.Diff(want, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Without the right to write Events (the chart renders the events Role only with the admission
// policy bounding it), the labeler logs the refusal, keeps probing and labels the node once the
// endpoint answers.
func TestRunDomainModeEventsForbidden(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "uid-n"}, Spec: corev1.NodeSpec{ProviderID: azureProviderID}})
	var writes atomic.Int32
	for _, verb := range []string{"create", "patch"} {
		cs.PrependReactor(verb, "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			writes.Add(1)
			return true, nil, apierrors.NewForbidden(corev1.Resource("events"), "", errors.New("no events Role"))
		})
	}
	domainMetadataReachable.Reset()
	// Two rounds of three requests go unanswered, then the endpoint answers.
	opts := testOptions(stallingEndpoint(t, 6))
	opts.RequestTimeout = 50 * time.Millisecond
	opts.ReprobeInterval = 10 * time.Millisecond
	before := testutil.ToFloat64(domainLabelings.WithLabelValues("metadata_unreachable"))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- RunDomainMode(ctx, cs, opts, time.Hour) }()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
		return err == nil && n.Labels[configv1.UpdateDomainLabelKey] == "4", nil
	})
	if err != nil {
		n, _ := cs.CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{})
		t.Fatalf("node not labelled after refused event writes: %v", n.Labels)
	}
	if got := testutil.ToFloat64(domainLabelings.WithLabelValues("metadata_unreachable")) - before; got != 2 {
		t.Errorf("result=metadata_unreachable counted %v times, want 2 (one per unanswered round)", got)
	}
	if got := writes.Load(); got != 2 {
		t.Errorf("%d event writes tried, want 2 (one Warning per round, each refused; no Normal after no Warning)", got)
	}
	if got := reachableSeries(t); got != 1 {
		t.Errorf("pool_labeler_domain_metadata_reachable = %v once read, want 1", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunDomainMode returned %v after labelling", err)
	}
}
