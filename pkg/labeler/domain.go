package labeler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// DefaultIMDSEndpoint is the Azure instance metadata service's compute document.
const DefaultIMDSEndpoint = "http://169.254.169.254/metadata/instance/compute?api-version=2021-02-01&format=json"

// ErrNotAzure means the metadata endpoint is not Azure's: what answers is not an Azure compute
// document (4xx, a redirect, another body), or nothing answered through every retry. Retrying at
// once does not help; the idle mode probes again every reprobe interval.
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
	// ReprobeInterval: when the endpoint is not Azure's, or never answered through Backoff, probe
	// it again this often instead of returning (0: return ErrNotAzure or the last error).
	ReprobeInterval time.Duration
	// PatchBackoff spaces the retries of a failed node read or patch (its Steps are ignored: the
	// patch is retried until it succeeds); the zero value uses Backoff's Duration, Factor and Cap.
	PatchBackoff wait.Backoff
	// HTTPClient for the metadata endpoint; nil: NewIMDSClient().
	HTTPClient *http.Client
}

// NewIMDSClient returns the client the domain mode reads the metadata endpoint with. It never
// uses a proxy: the endpoint is link-local, and HTTP(S)_PROXY set for the node's egress would
// send the request (and the node's identity with it) to the proxy. It follows no redirect: the
// real endpoint never redirects, and a redirect could point the request anywhere.
func NewIMDSClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ValidateDomainOptions checks the options the command takes from flags; errors name the flag.
func ValidateDomainOptions(opts DomainOptions, recheckInterval time.Duration) error {
	var errs []error
	if opts.NodeName == "" {
		errs = append(errs, errors.New("--node-name (or NODE_NAME) is required"))
	}
	if u, err := url.Parse(opts.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("--imds-endpoint: %v", err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--imds-endpoint: %q is not an absolute http(s) URL", opts.Endpoint))
	}
	if es := validation.IsQualifiedName(opts.UpdateDomainKey); len(es) > 0 {
		errs = append(errs, fmt.Errorf("--update-domain-key: %q: %s", opts.UpdateDomainKey, strings.Join(es, "; ")))
	}
	if opts.FaultDomainKey != "" {
		if es := validation.IsQualifiedName(opts.FaultDomainKey); len(es) > 0 {
			errs = append(errs, fmt.Errorf("--fault-domain-key: %q: %s", opts.FaultDomainKey, strings.Join(es, "; ")))
		} else if opts.FaultDomainKey == opts.UpdateDomainKey {
			errs = append(errs, fmt.Errorf("--fault-domain-key: %q is also --update-domain-key", opts.FaultDomainKey))
		}
	}
	if opts.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout must be positive, got %v", opts.RequestTimeout))
	}
	if opts.Backoff.Steps < 1 {
		errs = append(errs, fmt.Errorf("--attempts must be at least 1, got %d", opts.Backoff.Steps))
	}
	if recheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("--recheck-interval must be positive, got %v", recheckInterval))
	}
	if opts.ReprobeInterval < 0 {
		errs = append(errs, fmt.Errorf("--reprobe-interval must not be negative, got %v", opts.ReprobeInterval))
	}
	return errors.Join(errs...)
}

// FetchDomains reads the fault and update domain from the metadata endpoint, retrying transient
// failures (connection refused or unreachable, timeouts, 5xx, 429) with backoff: at boot the
// node's network, or the endpoint, may not be up yet. It returns ErrNotAzure (wrapped) for
// permanent signs of another platform (4xx, a redirect, a body that is not an Azure compute
// document) at once, and when nothing answered through every retry.
func FetchDomains(ctx context.Context, opts DomainOptions) (Domains, error) {
	logger := klog.FromContext(ctx)
	client := opts.HTTPClient
	if client == nil {
		client = NewIMDSClient()
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
		var unreachable unreachableError
		switch {
		case wait.Interrupted(err) && errors.As(lastErr, &unreachable) && ctx.Err() == nil:
			return Domains{}, fmt.Errorf("%w: nothing answered after %d attempts: %v", ErrNotAzure, opts.Backoff.Steps, lastErr)
		case wait.Interrupted(err) && lastErr != nil:
			return Domains{}, fmt.Errorf("instance metadata: giving up: %w", lastErr)
		}
		return Domains{}, err
	}
	return result, nil
}

type transientError struct{ error }

// unreachableError is a transient error where nothing answered at all (refused, unreachable).
type unreachableError struct{ transientError }

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
		// Refused or unreachable: no metadata service on this machine, or not yet (the node's
		// network coming up). Retried; FetchDomains says "not Azure" once retries run out.
		return Domains{}, unreachableError{transientError{err}}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Domains{}, transientError{fmt.Errorf("reading response: %w", err)}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return Domains{}, transientError{fmt.Errorf("HTTP %d", resp.StatusCode)}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return Domains{}, fmt.Errorf("%w: HTTP %d redirect to %q refused", ErrNotAzure, resp.StatusCode, resp.Header.Get("Location"))
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
// every interval, until ctx ends. A failed node read or patch is retried with PatchBackoff, not
// after a whole interval. When the endpoint is not Azure's (or never answered) it returns
// ErrNotAzure (wrapped), or, with a ReprobeInterval, probes again that often until it is.
func RunDomainMode(ctx context.Context, cs kubernetes.Interface, opts DomainOptions, interval time.Duration) error {
	logger := klog.FromContext(ctx)
	var d Domains
	for {
		var err error
		d, err = FetchDomains(ctx, opts)
		if err == nil {
			break
		}
		if errors.Is(err, ErrNotAzure) {
			domainLabelings.WithLabelValues("not_azure").Inc()
		} else {
			domainLabelings.WithLabelValues("error").Inc()
		}
		if opts.ReprobeInterval <= 0 || ctx.Err() != nil {
			return err
		}
		logger.Info("No Azure instance metadata; probing again later", "endpoint", opts.Endpoint, "err", err, "reprobeInterval", opts.ReprobeInterval)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(opts.ReprobeInterval):
		}
	}
	logger.Info("Read platform domains", "node", opts.NodeName, "faultDomain", d.FaultDomain, "updateDomain", d.UpdateDomain, "zone", d.Zone)
	retry := patchBackoff(opts)
	var lastErr error
	for {
		patched, err := LabelNodeDomains(ctx, cs, opts, d)
		next := interval
		switch {
		case ctx.Err() != nil:
			return lastErr
		case err != nil:
			lastErr = err
			next = retry.Step()
			domainLabelings.WithLabelValues("error").Inc()
			logger.Error(err, "Labelling the node failed; retrying", "node", opts.NodeName, "after", next)
		case patched:
			lastErr, retry = nil, patchBackoff(opts)
			domainLabelings.WithLabelValues("labelled").Inc()
			logger.Info("Labelled the node", "node", opts.NodeName, opts.UpdateDomainKey, d.UpdateDomain)
		default:
			lastErr, retry = nil, patchBackoff(opts)
			domainLabelings.WithLabelValues("unchanged").Inc()
		}
		select {
		case <-ctx.Done():
			return lastErr
		case <-time.After(next):
		}
	}
}

// patchBackoff is a fresh backoff for node patches: PatchBackoff, or Backoff's shape, never
// running out of steps (Step stays at Cap).
func patchBackoff(opts DomainOptions) *wait.Backoff {
	b := opts.PatchBackoff
	if b.Duration <= 0 {
		b = opts.Backoff
	}
	if b.Duration <= 0 {
		b.Duration = time.Second
	}
	if b.Factor < 1 {
		b.Factor = 2
	}
	if b.Cap <= 0 {
		b.Cap = time.Minute
	}
	b.Steps = math.MaxInt32
	return &b
}
