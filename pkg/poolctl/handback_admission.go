package poolctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
)

// admissionState is what poolctl handback reads of the admission path (docs/operations.md, the
// hand-off), to tell where the replacement of a pod it deletes goes: a pod it deletes was
// handed over by admission (its template does not name pool-scheduler), so its replacement
// waits for pool-scheduler again only if the admission path hands it over again.
type admissionState struct {
	// Webhook names the MutatingWebhookConfiguration; WebhookFound: it exists, with Hooks.
	Webhook      string
	WebhookFound bool
	Hooks        []webhookState
	// Binding names the MutatingAdmissionPolicyBinding; BindingFound: it exists (v1 or v1beta1),
	// with its paramRef Param (the switch it follows), ParamFound and ParamHandoff its data.handoff.
	Binding      string
	BindingFound bool
	Param        string
	ParamFound   bool
	ParamHandoff string
	// Switch is the hand-off controller's switch (SwitchFound, SwitchValue, SwitchReason) and
	// Lease pool-scheduler's leader-election Lease (LeaseFound, LeaderHealthy, LeaderReason by
	// handoff.ReadLeader): what the webhook's verdict follows.
	Switch        string
	SwitchFound   bool
	SwitchValue   string
	SwitchReason  string
	Lease         string
	LeaseFound    bool
	LeaderHealthy bool
	LeaderReason  string
	// Unreadable lists what could not be read, and why: the verdict cannot rest on it.
	Unreadable []string
}

// webhookState is one webhook of the configuration: its service (or URL), whether an endpoint
// of the service is ready (a URL counts as ready) and whether it fails closed.
type webhookState struct {
	Name       string
	Service    string
	Ready      bool
	FailClosed bool
}

// admissionNames say which objects make the admission path (the chart and the manifests name
// them after the scheduler, in the scheduler's namespace).
type admissionNames struct {
	Webhook, Binding string
	Switch, Lease    types.NamespacedName
}

func namesFor(schedulerName, namespace string) admissionNames {
	return admissionNames{
		Webhook: schedulerName,
		Binding: schedulerName,
		Switch:  types.NamespacedName{Namespace: namespace, Name: schedulerName + "-handoff"},
		Lease:   types.NamespacedName{Namespace: namespace, Name: schedulerName},
	}
}

// policyBindingVersions are the MutatingAdmissionPolicyBinding versions read, GA first.
var policyBindingVersions = []schema.GroupVersionResource{
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1", Resource: "mutatingadmissionpolicybindings"},
}

// readAdmission reads the admission path with get/list only: the webhook configuration, its
// services' EndpointSlices, the policy binding and its parameter, the switch and the Lease.
func readAdmission(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, n admissionNames, now time.Time) admissionState {
	s := admissionState{Webhook: n.Webhook, Binding: n.Binding, Switch: n.Switch.String(), Lease: n.Lease.String()}
	unreadable := func(what string, err error) { s.Unreadable = append(s.Unreadable, what+": "+err.Error()) }

	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, n.Webhook, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		unreadable("MutatingWebhookConfiguration "+n.Webhook, err)
	default:
		s.WebhookFound = true
		for _, w := range mwc.Webhooks {
			h := webhookState{Name: w.Name, Ready: true, FailClosed: w.FailurePolicy == nil || *w.FailurePolicy == "Fail"}
			if svc := w.ClientConfig.Service; svc != nil {
				h.Service = svc.Namespace + "/" + svc.Name
				ready, err := serviceReady(ctx, cs, svc.Namespace, svc.Name)
				if err != nil {
					unreadable("the EndpointSlices of service "+h.Service, err)
				}
				h.Ready = ready
			} else if w.ClientConfig.URL != nil {
				h.Service = *w.ClientConfig.URL
			}
			s.Hooks = append(s.Hooks, h)
		}
	}

	for _, gvr := range policyBindingVersions {
		b, err := dyn.Resource(gvr).Get(ctx, n.Binding, metav1.GetOptions{})
		if apierrors.IsNotFound(err) { // also: the version is not served
			continue
		}
		if err != nil {
			unreadable("MutatingAdmissionPolicyBinding "+n.Binding+" ("+gvr.Version+")", err)
			break
		}
		s.BindingFound = true
		name, _, _ := unstructured.NestedString(b.Object, "spec", "paramRef", "name")
		ns, _, _ := unstructured.NestedString(b.Object, "spec", "paramRef", "namespace")
		s.Param = ns + "/" + name
		if name == "" {
			break
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			unreadable("the policy's parameter ConfigMap "+s.Param, err)
		default:
			s.ParamFound, s.ParamHandoff = true, cm.Data[handoff.SwitchKey]
		}
		break
	}

	cm, err := cs.CoreV1().ConfigMaps(n.Switch.Namespace).Get(ctx, n.Switch.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		unreadable("the hand-off switch ConfigMap "+s.Switch, err)
	default:
		s.SwitchFound, s.SwitchValue, s.SwitchReason = true, cm.Data[handoff.SwitchKey], cm.Data[handoff.SwitchReasonKey]
	}

	lease, err := cs.CoordinationV1().Leases(n.Lease.Namespace).Get(ctx, n.Lease.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		unreadable("the Lease "+s.Lease, err)
	default:
		s.LeaseFound = true
		s.LeaderHealthy, s.LeaderReason = handoff.ReadLeader(lease, handoff.Lease{Lease: n.Lease, Duration: leaseDuration(lease)}, now)
	}
	return s
}

// serviceReady reports whether an endpoint of the service is ready (what kube-apiserver calls).
func serviceReady(ctx context.Context, cs kubernetes.Interface, namespace, name string) (bool, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return false, err
	}
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true, nil
			}
		}
	}
	return false, nil
}

// judgeAdmission says where the replacements of pods handed back go: refusals name each way
// they would be handed to pool-scheduler again (or could not be created), or what could not be
// read to tell; notes say what each part of the admission path does with them.
func judgeAdmission(s admissionState) (refusals, notes []string) {
	for _, u := range s.Unreadable {
		refusals = append(refusals, "cannot read "+u)
	}
	if !s.WebhookFound {
		notes = append(notes, fmt.Sprintf("no MutatingWebhookConfiguration %s", s.Webhook))
	}
	for _, h := range s.Hooks {
		where := fmt.Sprintf("webhook %s of MutatingWebhookConfiguration %s (%s)", h.Name, s.Webhook, h.Service)
		switch {
		case !h.Ready && h.FailClosed:
			refusals = append(refusals, where+" has no ready endpoint and fails closed: kube-apiserver would refuse the replacements")
		case !h.Ready:
			notes = append(notes, where+" has no ready endpoint: kube-apiserver creates the replacements unchanged (failurePolicy Ignore), for the default scheduler, without degraded mode's constraints")
		case !s.SwitchFound && !s.LeaseFound:
			refusals = append(refusals, fmt.Sprintf("%s answers, and neither the hand-off switch %s nor the Lease %s exists to tell whether it hands pods over (--scheduler-namespace)", where, s.Switch, s.Lease))
		case s.SwitchFound && s.SwitchValue != "true":
			notes = append(notes, fmt.Sprintf("%s answers; the hand-off switch %s is off (%s): replacements keep the default scheduler, in degraded mode", where, s.Switch, s.SwitchReason))
		case s.LeaseFound && !s.LeaderHealthy:
			notes = append(notes, fmt.Sprintf("%s answers; pool-scheduler has no healthy leader (%s): replacements keep the default scheduler, in degraded mode", where, s.LeaderReason))
		default:
			leader := "the hand-off switch " + s.Switch + " is on"
			if s.LeaseFound {
				leader = "pool-scheduler's leader is healthy (Lease " + s.Lease + ")"
			}
			refusals = append(refusals, fmt.Sprintf("%s answers and %s: it would hand the replacements to pool-scheduler again", where, leader))
		}
	}
	switch {
	case !s.BindingFound:
		notes = append(notes, fmt.Sprintf("no MutatingAdmissionPolicyBinding %s", s.Binding))
	case !s.ParamFound:
		notes = append(notes, fmt.Sprintf("MutatingAdmissionPolicyBinding %s: its switch %s is missing, so the policy is skipped: replacements keep the default scheduler, without degraded mode's constraints", s.Binding, s.Param))
	case s.ParamHandoff == "true":
		refusals = append(refusals, fmt.Sprintf("MutatingAdmissionPolicyBinding %s: its switch %s is on: the policy would hand the replacements to pool-scheduler again", s.Binding, s.Param))
	default:
		notes = append(notes, fmt.Sprintf("MutatingAdmissionPolicyBinding %s: its switch %s is off: replacements keep the default scheduler, in degraded mode", s.Binding, s.Param))
	}
	return refusals, notes
}

// refusal is the error of a hand-back the admission path refuses.
func refusal(refusals []string) error {
	return fmt.Errorf("refusing to delete: the replacements would not get the default scheduler:\n  - %s\n"+
		"Remove the admission path first, or wait until the hand-off is off (kubectl pool status); "+
		"--force deletes anyway (each replacement then waits for pool-scheduler again)",
		strings.Join(refusals, "\n  - "))
}
