// Package domainlabeler labels a node with its platform fault and update domain, read from the
// Azure instance metadata service (pool-labeler's domain mode, a DaemonSet): the labels
// NodePoolReady's requiredLabelKeys and DomainSpread wait for.
package domainlabeler

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

// DefaultIMDSEndpoint is the Azure instance metadata service's compute document.
const DefaultIMDSEndpoint = "http://169.254.169.254/metadata/instance/compute?api-version=2021-02-01&format=json"

// ErrNotAzure means the metadata endpoint is not Azure's: what answers is not an Azure compute
// document (4xx, a redirect, another body), or nothing answered through every retry on a node
// whose spec.providerID does not say Azure. Retrying at once does not help; the idle mode probes
// again every reprobe interval.
var ErrNotAzure = errors.New("instance metadata endpoint is not Azure's")

// ErrMetadataUnreachable means nothing answered through every retry (refused, unreachable, timed
// out) on a node whose spec.providerID says it is an Azure VM: the endpoint is there, but this
// pod cannot reach it. On AKS that is IMDS restriction (--enable-imds-restriction drops pod
// traffic to 169.254.169.254) or a network policy denying that egress. Never "not Azure": the
// node would be held for a label nobody writes, so RunDomainMode tells the node (an Event).
var ErrMetadataUnreachable = errors.New("instance metadata endpoint unreachable from this pod on an Azure node")

// Event reasons on the Node (kubectl describe node).
const (
	ReasonMetadataUnreachable = "InstanceMetadataUnreachable"
	ReasonMetadataReachable   = "InstanceMetadataReachable"
)

// maxEventMessage is the longest note events.k8s.io/v1 accepts; core/v1 Events (written here) have
// no limit, but readers of either API see the same object.
const maxEventMessage = 1024

// domainEventSource names the domain labeler in its Events.
const domainEventSource = "pool-labeler-domain"

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
	// it again this often instead of returning (0: return ErrNotAzure, ErrMetadataUnreachable or
	// the last error).
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
	if err := validateDomainKey("--update-domain-key", opts.UpdateDomainKey); err != nil {
		errs = append(errs, err)
	}
	if opts.FaultDomainKey != "" {
		if err := validateDomainKey("--fault-domain-key", opts.FaultDomainKey); err != nil {
			errs = append(errs, err)
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

// validateDomainKey checks one of the domain labeler's keys: a label key under
// configv1.DomainLabelPrefix. That prefix is what keeps every other writer off the key: the CRD
// and pkg/pool refuse it in NodePoolLabelSets, the labeler controller ignores and reports it
// (pool.RefusedKey), and the controller's admission policy refuses its writes. A key outside it
// would still be refused by that policy (its domainKeys), but a NodePoolLabelSet could name it,
// and the policy would then refuse the controller's whole write to the set's pool: no node of
// the pool would get any of its labels, and the pool would be held forever.
func validateDomainKey(flag, key string) error {
	if es := validation.IsQualifiedName(key); len(es) > 0 {
		return fmt.Errorf("%s: %q: %s", flag, key, strings.Join(es, "; "))
	}
	if name, ok := strings.CutPrefix(key, configv1.DomainLabelPrefix); !ok || name == "" {
		return fmt.Errorf("%s: %q is not under %s: the domain labeler's keys must be (a NodePoolLabelSet naming another key it writes would block its whole pool)", flag, key, configv1.DomainLabelPrefix)
	}
	return nil
}

// FetchDomains reads the fault and update domain from the metadata endpoint, retrying transient
// failures (connection refused or unreachable, timeouts, 5xx, 429) with backoff: at boot the
// node's network, or the endpoint, may not be up yet. It returns ErrNotAzure (wrapped) for
// permanent signs of another platform (4xx, a redirect, a body that is not an Azure compute
// document) at once, and when every retry was refused or unreachable; when the last of them timed
// out, an error that is not ErrNotAzure. Either way, when nothing answered, the error also
// satisfies IsNoAnswer: on an Azure node RunDomainMode makes it ErrMetadataUnreachable.
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
		var timedOut timeoutError
		switch {
		case wait.Interrupted(err) && errors.As(lastErr, &unreachable) && ctx.Err() == nil:
			return Domains{}, fmt.Errorf("%w: %w", ErrNotAzure, noAnswerError{attempts: opts.Backoff.Steps, last: lastErr})
		case wait.Interrupted(err) && errors.As(lastErr, &timedOut) && ctx.Err() == nil:
			return Domains{}, fmt.Errorf("instance metadata: giving up: %w", noAnswerError{attempts: opts.Backoff.Steps, last: lastErr})
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

// timeoutError is a transient error where the request timed out: nothing answered in time. A
// packet filter that drops the traffic (AKS IMDS restriction) looks like this, not like a refusal.
type timeoutError struct{ transientError }

// noAnswerError: nothing answered through every retry, the last attempt refused, unreachable or
// timed out. Whether that means "not Azure" is the node's to say (spec.providerID).
type noAnswerError struct {
	attempts int
	last     error
}

func (e noAnswerError) Error() string {
	return fmt.Sprintf("nothing answered after %d attempts: %v", e.attempts, e.last)
}

// IsNoAnswer reports whether FetchDomains gave up because nothing answered at all (refused,
// unreachable or timed out through every retry), as opposed to an answer that was not Azure's or
// a server error.
func IsNoAnswer(err error) bool {
	var na noAnswerError
	return errors.As(err, &na)
}

// IsAzureProviderID reports whether a node's spec.providerID names an Azure VM: cloud-provider-azure
// and AKS write azure:///subscriptions/... (compared without case, as cloud-provider-azure does).
func IsAzureProviderID(providerID string) bool {
	const prefix = "azure://"
	return len(providerID) >= len(prefix) && strings.EqualFold(providerID[:len(prefix)], prefix)
}

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
			return Domains{}, timeoutError{transientError{fmt.Errorf("request timed out after %v", opts.RequestTimeout)}}
		}
		// Refused or unreachable: no metadata service on this machine, or not yet (the node's
		// network coming up). Retried; once retries run out, the node's providerID decides
		// between "not Azure" and "unreachable from this pod" (RunDomainMode).
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
		// Where cloud-provider-azure labels the fault domain itself (PR #10907's
		// topology.kubernetes.azure.com/fault-domain), a second label with the same value says
		// nothing more: DomainSpread reads the upstream one first.
		_, upstream := node.Labels[configv1.AzureFaultDomainLabelKey]
		switch {
		case (d.Zone != "" || upstream) && has:
			labels[opts.FaultDomainKey] = nil // a merge patch's null removes the label
		case d.Zone == "" && !upstream && current != d.FaultDomain:
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
// after a whole interval. When the endpoint is not Azure's (or never answered on a node that is
// not an Azure VM) it returns ErrNotAzure (wrapped); when it never answered on an Azure VM, it
// returns ErrMetadataUnreachable after a Warning Event on the node. With a ReprobeInterval it
// probes again that often instead, until the endpoint answers.
//
// When ctx ends it returns the verdict of the last completed round (probe round or labelling
// round; nil when none completed or the last one succeeded): a round that ctx cut short (its
// metadata request, node read or patch) failed because of the cancellation, which is neither
// counted as an error nor returned as one.
func RunDomainMode(ctx context.Context, cs kubernetes.Interface, opts DomainOptions, interval time.Duration) error {
	logger := klog.FromContext(ctx)
	events := &metadataEvents{cs: cs, opts: opts}
	var d Domains
	var verdict error // the last completed probe round's
	for {
		var err error
		d, err = FetchDomains(ctx, opts)
		if err == nil {
			break
		}
		var node *corev1.Node
		node, err = classifyNoAnswer(ctx, cs, opts, err)
		if ctx.Err() != nil {
			// Cut short by ctx (FetchDomains gives up with "giving up: <the cancelled
			// request>", the node read fails): not a verdict, so no metric and no Event.
			return verdict
		}
		verdict = err
		switch {
		case errors.Is(err, ErrMetadataUnreachable):
			domainLabelings.WithLabelValues("metadata_unreachable").Inc()
			domainMetadataReachable.WithLabelValues().Set(0)
			logger.Error(err, "Instance metadata unreachable from this pod on an Azure node: the node gets no domain labels until it answers; see the node's "+ReasonMetadataUnreachable+" event",
				"node", opts.NodeName, "providerID", node.Spec.ProviderID, "endpoint", opts.Endpoint, "reprobeInterval", opts.ReprobeInterval)
			events.unreachable(ctx, node, err)
		case errors.Is(err, ErrNotAzure):
			domainLabelings.WithLabelValues("not_azure").Inc()
			domainMetadataReachable.Reset() // not a node where the endpoint should answer
		default:
			domainLabelings.WithLabelValues("error").Inc()
		}
		if opts.ReprobeInterval <= 0 || ctx.Err() != nil {
			return err
		}
		logger.Info("No instance metadata read; probing again later", "endpoint", opts.Endpoint, "err", err, "reprobeInterval", opts.ReprobeInterval)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(opts.ReprobeInterval):
		}
	}
	domainMetadataReachable.WithLabelValues().Set(1)
	events.reachable(ctx)
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

// classifyNoAnswer turns FetchDomains' "nothing answered" into ErrMetadataUnreachable on an Azure
// node (spec.providerID azure://...), and returns the node it read. Other errors, and nodes that
// are not Azure VMs (another provider, or no providerID yet), keep FetchDomains' verdict. When the
// node cannot be read, the error is neither ErrNotAzure nor ErrMetadataUnreachable: without the
// providerID the labeler cannot tell, and saying "not Azure" on a guess would hide a blocked
// endpoint (the same read is needed to label the node anyway).
func classifyNoAnswer(ctx context.Context, cs kubernetes.Interface, opts DomainOptions, err error) (*corev1.Node, error) {
	var na noAnswerError
	if !errors.As(err, &na) || ctx.Err() != nil {
		return nil, err
	}
	node, getErr := cs.CoreV1().Nodes().Get(ctx, opts.NodeName, metav1.GetOptions{})
	if getErr != nil {
		return nil, fmt.Errorf("instance metadata %s: %v; reading node %s to tell an Azure VM by its spec.providerID: %w", opts.Endpoint, na, opts.NodeName, getErr)
	}
	if !IsAzureProviderID(node.Spec.ProviderID) {
		return node, err
	}
	return node, fmt.Errorf("%w: %s: %w", ErrMetadataUnreachable, opts.Endpoint, na)
}

// metadataEvents writes the domain labeler's Events on its Node, synchronously (a run that exits
// right after, --on-not-azure=exit, still leaves its Event) and without a broadcaster: one
// Warning per unreachable probe round, updating the same Event (count, last time, message) so the
// node shows one line that stays fresh past the apiserver's event TTL; one Normal Event when the
// endpoint answers after a Warning.
type metadataEvents struct {
	cs    kubernetes.Interface
	opts  DomainOptions
	event *corev1.Event // the Warning written last, nil before the first
}

func (m *metadataEvents) unreachable(ctx context.Context, node *corev1.Node, err error) {
	now := metav1.Now()
	msg := unreachableMessage(m.opts, err)
	if m.event != nil {
		patch, _ := json.Marshal(map[string]any{"count": m.event.Count + 1, "lastTimestamp": now, "message": msg})
		ev, perr := m.cs.CoreV1().Events(m.event.Namespace).Patch(ctx, m.event.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if perr == nil {
			m.event = ev
			return
		}
		if !apierrors.IsNotFound(perr) {
			m.writeFailed(ctx, perr, node.Name, ReasonMetadataUnreachable)
			return
		}
		// Expired (the apiserver's event TTL): write a new one.
	}
	ev, cerr := m.create(ctx, node, corev1.EventTypeWarning, ReasonMetadataUnreachable, msg, now)
	if cerr != nil {
		m.writeFailed(ctx, cerr, node.Name, ReasonMetadataUnreachable)
		return
	}
	m.event = ev
}

// writeFailed logs a failed Event write; the labeler carries on (Events are a courtesy, labelling
// does not depend on them). Refused (no events Role: the chart renders it only with the admission
// policy that bounds it) is logged as such; cut short by ctx ending, not at all.
func (m *metadataEvents) writeFailed(ctx context.Context, err error, node, reason string) {
	logger := klog.FromContext(ctx)
	switch {
	case ctx.Err() != nil:
		logger.V(4).Info("Writing the node's event cut short", "node", node, "reason", reason, "err", err)
	case apierrors.IsForbidden(err):
		logger.Info("Writing the node's event was refused: the node shows no event; labelling goes on (needs create and patch on events in namespace default, and the pool-labeler-domain-own-node-events admission policy allowing it)",
			"node", node, "reason", reason, "err", err.Error())
	default:
		logger.Error(err, "Writing the node's event failed", "node", node, "reason", reason)
	}
}

func (m *metadataEvents) reachable(ctx context.Context) {
	if m.event == nil {
		return
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.event.InvolvedObject.Name, UID: m.event.InvolvedObject.UID}}
	msg := fmt.Sprintf("The instance metadata endpoint %s answers again; labelling the node.", m.opts.Endpoint)
	if _, err := m.create(ctx, node, corev1.EventTypeNormal, ReasonMetadataReachable, msg, metav1.Now()); err != nil {
		m.writeFailed(ctx, err, node.Name, ReasonMetadataReachable)
	}
	m.event = nil
}

// create writes an Event about node in namespace default, where core/v1 Events about
// cluster-scoped objects must be (the apiserver refuses other namespaces for them).
func (m *metadataEvents) create(ctx context.Context, node *corev1.Node, eventType, reason, msg string, now metav1.Time) (*corev1.Event, error) {
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", node.Name, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID},
		Reason:         reason,
		Message:        msg,
		Type:           eventType,
		Source:         corev1.EventSource{Component: domainEventSource, Host: node.Name},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	return m.cs.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
}

// unreachableMessage says what failed, what it costs and how to fix it, in at most
// maxEventMessage bytes.
func unreachableMessage(opts DomainOptions, err error) string {
	cause := err.Error()
	var na noAnswerError
	if errors.As(err, &na) {
		cause = na.Error()
	}
	if len(cause) > 200 {
		cause = cause[:200] + "..."
	}
	again := "The labeler exits with an error (--on-not-azure is not idle)."
	if opts.ReprobeInterval > 0 {
		again = fmt.Sprintf("Probing again every %v.", opts.ReprobeInterval)
	}
	msg := fmt.Sprintf("This Azure VM's instance metadata endpoint %s does not answer the domain labeler's pod (%s), "+
		"so the node gets no %s label (where requiredLabelKeys names it, pool-scheduler keeps pods off the node). "+
		"Likely cause: AKS IMDS restriction (az aks update --enable-imds-restriction; networkProfile.podLinkLocalAccess None) "+
		"or a NetworkPolicy or other egress rule that drops pod traffic to 169.254.169.254. "+
		"Fix: run the domain labeler with hostNetwork (chart: labeler.domain.hostNetwork=true) "+
		"or allow its egress to 169.254.169.254/32 TCP port 80. %s",
		opts.Endpoint, cause, opts.UpdateDomainKey, again)
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	return msg
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
