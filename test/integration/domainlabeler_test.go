package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/test/utils/ktesting"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/domainlabeler"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// imds answers like Azure's instance metadata service: 400 without the Metadata header, then
// the responses of script in turn (the last one repeats).
func imds(t *testing.T, script ...func(w http.ResponseWriter)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" {
			http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
			return
		}
		i := int(calls.Add(1)) - 1
		script[min(i, len(script)-1)](w)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func compute(fd, ud any) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"location":"westeurope","name":"aks-nodepool1-0","platformFaultDomain":%q,"platformUpdateDomain":%q,"vmSize":"Standard_D2s_v3"}`, fmt.Sprint(fd), fmt.Sprint(ud))
	}
}

// computeZonal is the compute document of a VM in an availability zone.
func computeZonal(fd, ud, zone any) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"location":"westeurope","name":"aks-nodepool1-vmss000000","platformFaultDomain":%q,"platformUpdateDomain":%q,"zone":%q,"vmSize":"Standard_D2s_v3"}`, fmt.Sprint(fd), fmt.Sprint(ud), fmt.Sprint(zone))
	}
}

func status(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

func body(s string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { fmt.Fprint(w, s) }
}

func stall(d time.Duration) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { time.Sleep(d) }
}

// TestDomainLabeler runs the domain mode against a local metadata server and a real apiserver.
func TestDomainLabeler(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client

	tests := []struct {
		name     string
		script   []func(http.ResponseWriter)
		closed   bool // nothing listens: connection refused
		want     domainlabeler.Domains
		wantErr  error // errors.Is target; nil with an empty want means "gives up"
		minCalls int32
		giveUp   bool
		// labels the node starts with, beside its pool label
		nodeLabels map[string]string
		// the node's spec.providerID: azure://... makes an endpoint that never answers
		// "unreachable from this pod" (an event on the node), not "not Azure"
		providerID string
		wantEvent  bool
	}{
		{name: "Azure compute document", script: []func(http.ResponseWriter){compute(1, 4)}, want: domainlabeler.Domains{FaultDomain: "1", UpdateDomain: "4"}, minCalls: 1},
		// Fault domains repeat in every zone: on a zonal VM no fault-domain label is written, and
		// one an earlier version wrote is removed, so it can never stand for the zone.
		{name: "zonal VM: no fault-domain label", script: []func(http.ResponseWriter){computeZonal(0, 3, 2)}, want: domainlabeler.Domains{UpdateDomain: "3", Zone: "2"}, minCalls: 1,
			nodeLabels: map[string]string{"topology.kubernetes.io/zone": "westeurope-2", configv1.FaultDomainLabelKey: "0"}},
		// Where cloud-provider-azure labels the fault domain itself (PR #10907), pool-labeler
		// writes no second label with the same value, and removes one it wrote before.
		{name: "fault domain labelled upstream: no fault-domain label of ours", script: []func(http.ResponseWriter){compute(1, 4)}, want: domainlabeler.Domains{UpdateDomain: "4"}, minCalls: 1,
			nodeLabels: map[string]string{configv1.AzureFaultDomainLabelKey: "1", configv1.FaultDomainLabelKey: "1"}},
		{name: "non-numeric zone is refused", script: []func(http.ResponseWriter){computeZonal(0, 3, "../x")}, wantErr: domainlabeler.ErrNotAzure},
		{name: "server errors are retried", script: []func(http.ResponseWriter){status(500), status(503), status(429), compute(0, 2)}, want: domainlabeler.Domains{FaultDomain: "0", UpdateDomain: "2"}, minCalls: 4},
		{name: "timeouts are retried", script: []func(http.ResponseWriter){stall(500 * time.Millisecond), compute(2, 0)}, want: domainlabeler.Domains{FaultDomain: "2", UpdateDomain: "0"}, minCalls: 2},
		{name: "garbage is not Azure", script: []func(http.ResponseWriter){body("<html>hello</html>")}, wantErr: domainlabeler.ErrNotAzure},
		{name: "JSON without domains is not Azure", script: []func(http.ResponseWriter){body(`{"compute":{}}`)}, wantErr: domainlabeler.ErrNotAzure},
		{name: "non-numeric domain is refused", script: []func(http.ResponseWriter){compute("../etc", 1)}, wantErr: domainlabeler.ErrNotAzure},
		{name: "404 is not Azure", script: []func(http.ResponseWriter){status(404)}, wantErr: domainlabeler.ErrNotAzure},
		{name: "nothing listening is not Azure", closed: true, wantErr: domainlabeler.ErrNotAzure},
		{name: "another provider, nothing listening: not Azure", closed: true, wantErr: domainlabeler.ErrNotAzure, providerID: "aws:///eu-west-1a/i-0123456789abcdef0"},
		// AKS IMDS restriction and egress policies block the endpoint for pods: on a node that
		// is an Azure VM, that is a blocked endpoint the node must show, never "not Azure".
		{name: "Azure node, nothing listening: unreachable, with an event", closed: true, wantErr: domainlabeler.ErrMetadataUnreachable, providerID: azureProviderID, wantEvent: true},
		{name: "Azure node, packets dropped: unreachable, with an event", script: []func(http.ResponseWriter){stall(500 * time.Millisecond)}, wantErr: domainlabeler.ErrMetadataUnreachable, providerID: azureProviderID, wantEvent: true},
		{name: "persistent server errors: gives up", script: []func(http.ResponseWriter){status(500)}, giveUp: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodeName := fmt.Sprintf("azure-%d", i)
			labels := map[string]string{"kubernetes.azure.com/agentpool": "nodepool1"}
			for k, v := range tt.nodeLabels {
				labels[k] = v
			}
			node := util.Node(nodeName, labels).Obj()
			node.Spec.ProviderID = tt.providerID
			node = util.CreateNode(tCtx, t, cs, node)
			endpoint := "http://127.0.0.1:1/metadata/instance/compute"
			var calls *atomic.Int32
			if !tt.closed {
				var srv *httptest.Server
				srv, calls = imds(t, tt.script...)
				endpoint = srv.URL + "/metadata/instance/compute?api-version=2021-02-01&format=json"
			}
			opts := domainlabeler.DomainOptions{
				NodeName: nodeName, Endpoint: endpoint,
				FaultDomainKey: configv1.FaultDomainLabelKey, UpdateDomainKey: configv1.UpdateDomainLabelKey,
				RequestTimeout: 200 * time.Millisecond,
				Backoff:        wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5},
			}
			ctx, cancel := context.WithCancel(tCtx)
			done := make(chan error, 1)
			go func() { done <- domainlabeler.RunDomainMode(ctx, cs, opts, 50*time.Millisecond) }()
			defer cancel()

			if tt.wantErr != nil || tt.giveUp {
				select {
				case err := <-done:
					if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
						t.Fatalf("error = %v, want %v", err, tt.wantErr)
					}
					if tt.wantEvent && errors.Is(err, domainlabeler.ErrNotAzure) {
						t.Fatalf("error = %v: an Azure node is never 'not Azure'", err)
					}
					if tt.giveUp && (err == nil || errors.Is(err, domainlabeler.ErrNotAzure)) {
						t.Fatalf("error = %v, want giving up on a transient error", err)
					}
					t.Logf("returned: %v", err)
				case <-time.After(30 * time.Second):
					t.Fatal("domain mode did not return")
				}
				n, err := cs.CoreV1().Nodes().Get(tCtx, nodeName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := n.Labels[configv1.UpdateDomainLabelKey]; ok {
					t.Errorf("node labelled despite the error: %v", n.Labels)
				}
				checkMetadataEvent(tCtx, t, cs, node, endpoint, tt.wantEvent)
				return
			}
			err := wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				fd, hasFD := n.Labels[configv1.FaultDomainLabelKey]
				_, upstream := tt.nodeLabels[configv1.AzureFaultDomainLabelKey]
				return n.Labels[configv1.UpdateDomainLabelKey] == tt.want.UpdateDomain && hasFD == (tt.want.Zone == "" && !upstream) && fd == tt.want.FaultDomain, nil
			})
			if err != nil {
				n, _ := cs.CoreV1().Nodes().Get(tCtx, nodeName, metav1.GetOptions{})
				t.Fatalf("node not labelled with %+v (fault-domain label only outside zones, and only without the upstream one): %v", tt.want, n.Labels)
			}
			if calls.Load() < tt.minCalls {
				t.Errorf("%d metadata calls, want at least %d", calls.Load(), tt.minCalls)
			}
			// Labels removed by hand are put back by the periodic check.
			util.PatchNode(tCtx, t, cs, nodeName, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, configv1.UpdateDomainLabelKey))
			err = wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
				return err == nil && n.Labels[configv1.UpdateDomainLabelKey] == tt.want.UpdateDomain, nil
			})
			if err != nil {
				t.Fatal("removed update-domain label not restored")
			}
		})
	}
}

const azureProviderID = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/mc_rg_aks_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-vmss/virtualMachines/0"

// checkMetadataEvent: the node has an InstanceMetadataUnreachable warning, found the way
// `kubectl describe node` finds events (kind, name and uid of the node, namespace default), that
// names the endpoint, the likely causes and the fixes; or, with !want, none.
func checkMetadataEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, node *v1.Node, endpoint string, want bool) {
	t.Helper()
	selector := fields.Set{
		"involvedObject.kind": "Node", "involvedObject.name": node.Name, "involvedObject.uid": string(node.UID),
		"reason": domainlabeler.ReasonMetadataUnreachable,
	}.AsSelector().String()
	list, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if !want {
		if len(list.Items) != 0 {
			t.Errorf("node %s has %s events, want none: %v", node.Name, domainlabeler.ReasonMetadataUnreachable, list.Items)
		}
		return
	}
	if len(list.Items) != 1 {
		t.Fatalf("node %s has %d %s events, want 1", node.Name, len(list.Items), domainlabeler.ReasonMetadataUnreachable)
	}
	ev := list.Items[0]
	if ev.Type != v1.EventTypeWarning {
		t.Errorf("event type %s, want Warning", ev.Type)
	}
	for _, s := range []string{endpoint, "nothing answered", "--enable-imds-restriction", "NetworkPolicy", "labeler.domain.hostNetwork=true", "169.254.169.254/32 TCP port 80"} {
		if !strings.Contains(ev.Message, s) {
			t.Errorf("event message lacks %q:\n%s", s, ev.Message)
		}
	}
	t.Logf("%s: %s", ev.Reason, ev.Message)
}

// TestDomainLabelerRecovers: the domain mode does not give up on a node for good when the
// metadata endpoint or the apiserver fails for a while.
func TestDomainLabelerRecovers(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	labelled := func(t *testing.T, nodeName, ud string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(tCtx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			return err == nil && n.Labels[configv1.UpdateDomainLabelKey] == ud, nil
		})
		if err != nil {
			n, _ := cp.Client.CoreV1().Nodes().Get(tCtx, nodeName, metav1.GetOptions{})
			t.Fatalf("node %s not labelled with update domain %s: %v", nodeName, ud, n.GetLabels())
		}
	}
	opts := func(nodeName, endpoint string) domainlabeler.DomainOptions {
		return domainlabeler.DomainOptions{
			NodeName: nodeName, Endpoint: endpoint,
			FaultDomainKey: configv1.FaultDomainLabelKey, UpdateDomainKey: configv1.UpdateDomainLabelKey,
			RequestTimeout: 2 * time.Second,
			Backoff:        wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 3},
			PatchBackoff:   wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Cap: 200 * time.Millisecond},
		}
	}
	// A long recheck interval: only the retries under test can label the node in time.
	const interval = time.Hour

	t.Run("not Azure at boot: idle mode probes again", func(t *testing.T) {
		nodeName := "reprobe"
		util.CreateNode(tCtx, t, cp.Client, util.Node(nodeName, nil).Obj())
		// The first two answers say "not Azure" (a 404, as before the endpoint is set up).
		srv, calls := imds(t, status(404), status(404), compute(1, 3))
		o := opts(nodeName, srv.URL+"/metadata/instance/compute")
		o.ReprobeInterval = 50 * time.Millisecond
		ctx, cancel := context.WithCancel(tCtx)
		defer cancel()
		go func() { _ = domainlabeler.RunDomainMode(ctx, cp.Client, o, interval) }()
		labelled(t, nodeName, "3")
		if calls.Load() < 3 {
			t.Errorf("%d metadata calls, want at least 3", calls.Load())
		}
	})

	t.Run("node patch fails: retried with backoff, not after the recheck interval", func(t *testing.T) {
		nodeName := "late-node"
		srv, _ := imds(t, compute(0, 2))
		// Count the labeler's failed node reads: the node does not exist yet.
		var notFound atomic.Int32
		cfg := rest.CopyConfig(cp.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(r)
				if err == nil && resp.StatusCode == http.StatusNotFound && strings.HasSuffix(r.URL.Path, "/nodes/"+nodeName) {
					notFound.Add(1)
				}
				return resp, err
			})
		})
		cs := kubernetes.NewForConfigOrDie(cfg)
		ctx, cancel := context.WithCancel(tCtx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- domainlabeler.RunDomainMode(ctx, cs, opts(nodeName, srv.URL+"/metadata/instance/compute"), interval)
		}()
		err := wait.PollUntilContextTimeout(tCtx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return notFound.Load() >= 1, nil
		})
		if err != nil {
			t.Fatal("the labeler never tried to read the node")
		}
		util.CreateNode(tCtx, t, cp.Client, util.Node(nodeName, nil).Obj())
		labelled(t, nodeName, "2")
		select {
		case err := <-done:
			t.Fatalf("domain mode returned: %v", err)
		default:
		}
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
