package labeler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// DefaultIMDSEndpoint is the Azure instance metadata service's compute document.
const DefaultIMDSEndpoint = "http://169.254.169.254/metadata/instance/compute?api-version=2021-02-01&format=json"

// Default keys the domain mode writes.
const (
	DefaultUpdateDomainKey = "topology.pool-scheduler.io/update-domain"
	DefaultFaultDomainKey  = "topology.pool-scheduler.io/fault-domain"
)

// ErrNotAzure means the metadata endpoint is not Azure's: nothing answers, or what answers is
// not an Azure compute document. Retrying does not help.
var ErrNotAzure = errors.New("instance metadata endpoint is not Azure's")

// Domains is a node's platform fault and update domain, and its availability zone ("" for a
// VM outside zones).
type Domains struct {
	FaultDomain, UpdateDomain string
	Zone                      string
}

// DomainOptions configure the domain mode.
type DomainOptions struct {
	NodeName        string
	Endpoint        string
	FaultDomainKey  string // empty: do not write the fault domain
	UpdateDomainKey string
	// RequestTimeout bounds one metadata request; Backoff spaces the retries of transient errors.
	RequestTimeout time.Duration
	Backoff        wait.Backoff
	HTTPClient     *http.Client
}

// FetchDomains reads the fault and update domain from the metadata endpoint, retrying transient
// failures (timeouts, 5xx, 429) with backoff. It returns ErrNotAzure (wrapped) for permanent
// signs of another platform: connection refused, 4xx, or a body that is not an Azure compute
// document.
func FetchDomains(ctx context.Context, opts DomainOptions) (Domains, error) {
	logger := klog.FromContext(ctx)
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	var result Domains
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, opts.Backoff, func(ctx context.Context) (bool, error) {
		d, err := fetchOnce(ctx, client, opts)
		if err == nil {
			result = d
			return true, nil
		}
		if errors.Is(err, ErrNotAzure) {
			return false, err
		}
		lastErr = err
		logger.Info("Instance metadata not available yet, retrying", "endpoint", opts.Endpoint, "err", err)
		return false, nil
	})
	if err != nil {
		if wait.Interrupted(err) && lastErr != nil {
			return Domains{}, fmt.Errorf("instance metadata: giving up: %w", lastErr)
		}
		return Domains{}, err
	}
	return result, nil
}

type transientError struct{ error }

func fetchOnce(ctx context.Context, client *http.Client, opts DomainOptions) (Domains, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, opts.Endpoint, nil)
	if err != nil {
		return Domains{}, fmt.Errorf("%w: %v", ErrNotAzure, err)
	}
	req.Header.Set("Metadata", "true")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Domains{}, transientError{fmt.Errorf("request timed out after %v", opts.RequestTimeout)}
		}
		// Refused or unreachable: no metadata service on this machine.
		return Domains{}, fmt.Errorf("%w: %v", ErrNotAzure, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Domains{}, transientError{fmt.Errorf("reading response: %w", err)}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return Domains{}, transientError{fmt.Errorf("HTTP %d", resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		return Domains{}, fmt.Errorf("%w: HTTP %d", ErrNotAzure, resp.StatusCode)
	}
	var doc struct {
		PlatformFaultDomain  *json.RawMessage `json:"platformFaultDomain"`
		PlatformUpdateDomain *json.RawMessage `json:"platformUpdateDomain"`
		Zone                 *json.RawMessage `json:"zone"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Domains{}, fmt.Errorf("%w: response is not JSON: %v", ErrNotAzure, err)
	}
	fd, err := domainNumber(doc.PlatformFaultDomain)
	if err != nil {
		return Domains{}, fmt.Errorf("%w: platformFaultDomain: %v", ErrNotAzure, err)
	}
	ud, err := domainNumber(doc.PlatformUpdateDomain)
	if err != nil {
		return Domains{}, fmt.Errorf("%w: platformUpdateDomain: %v", ErrNotAzure, err)
	}
	zone, err := zoneName(doc.Zone)
	if err != nil {
		return Domains{}, fmt.Errorf("%w: zone: %v", ErrNotAzure, err)
	}
	return Domains{FaultDomain: fd, UpdateDomain: ud, Zone: zone}, nil
}

// zoneName accepts the compute document's zone: absent or "" (a VM outside zones) or a zone
// number such as "1".
func zoneName(raw *json.RawMessage) (string, error) {
	if raw == nil {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(*raw, &s); err != nil {
		return "", fmt.Errorf("not a string: %s", *raw)
	}
	if s == "" {
		return "", nil
	}
	if _, err := strconv.ParseUint(s, 10, 16); err != nil {
		return "", fmt.Errorf("not a zone number: %q", s)
	}
	return s, nil
}

// domainNumber accepts "3" or 3 and returns the decimal string; anything else is refused, so
// no garbage ever becomes a label value.
func domainNumber(raw *json.RawMessage) (string, error) {
	if raw == nil {
		return "", errors.New("missing")
	}
	var s string
	if err := json.Unmarshal(*raw, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(*raw, &n); err != nil {
			return "", fmt.Errorf("not a number: %s", *raw)
		}
		s = n.String()
	}
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return "", fmt.Errorf("not a domain number: %q", s)
	}
	return strconv.FormatUint(v, 10), nil
}

// LabelNodeDomains patches the node's domain labels if they differ; it reports whether it patched.
//
// On a zonal VM the fault-domain label is not written (and removed if an earlier version wrote
// it): Azure numbers fault domains within each zone, so the values repeat in every zone, and
// under a zonal scale set's default max spreading every VM reports the same one. A label with
// those values would let anything that reads it alone treat nodes of different zones as one
// fault domain. The node's zone label (cloud-provider-azure's <region>-<zone>) is the fault
// boundary there; outside zones cloud-provider-azure writes the fault domain into the zone
// label, and this label repeats it for clusters whose nodes lack a zone label.
func LabelNodeDomains(ctx context.Context, cs kubernetes.Interface, opts DomainOptions, d Domains) (bool, error) {
	node, err := cs.CoreV1().Nodes().Get(ctx, opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading node %s: %w", opts.NodeName, err)
	}
	labels := map[string]any{}
	if node.Labels[opts.UpdateDomainKey] != d.UpdateDomain {
		labels[opts.UpdateDomainKey] = d.UpdateDomain
	}
	if opts.FaultDomainKey != "" {
		current, has := node.Labels[opts.FaultDomainKey]
		switch {
		case d.Zone != "" && has:
			labels[opts.FaultDomainKey] = nil // a merge patch's null removes the label
		case d.Zone == "" && current != d.FaultDomain:
			labels[opts.FaultDomainKey] = d.FaultDomain
		}
	}
	if len(labels) == 0 {
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return false, err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, opts.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("labelling node %s: %w", opts.NodeName, err)
	}
	return true, nil
}

// RunDomainMode reads the domains and labels the node, then keeps the labels in place, checking
// every interval, until ctx ends. It returns ErrNotAzure (wrapped) when the platform is not Azure.
func RunDomainMode(ctx context.Context, cs kubernetes.Interface, opts DomainOptions, interval time.Duration) error {
	logger := klog.FromContext(ctx)
	d, err := FetchDomains(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrNotAzure) {
			domainLabelings.WithLabelValues("not_azure").Inc()
		} else {
			domainLabelings.WithLabelValues("error").Inc()
		}
		return err
	}
	logger.Info("Read platform domains", "node", opts.NodeName, "faultDomain", d.FaultDomain, "updateDomain", d.UpdateDomain, "zone", d.Zone)
	var lastErr error
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		patched, err := LabelNodeDomains(ctx, cs, opts, d)
		switch {
		case err != nil:
			lastErr = err
			domainLabelings.WithLabelValues("error").Inc()
			logger.Error(err, "Labelling the node failed; retrying", "node", opts.NodeName)
		case patched:
			lastErr = nil
			domainLabelings.WithLabelValues("labelled").Inc()
			logger.Info("Labelled the node", "node", opts.NodeName, opts.UpdateDomainKey, d.UpdateDomain)
		default:
			lastErr = nil
			domainLabelings.WithLabelValues("unchanged").Inc()
		}
	}, interval)
	return lastErr
}
