package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

// policyBindings are the MutatingAdmissionPolicyBinding versions (v1 from Kubernetes 1.36,
// v1beta1 before): each is deleted where served.
var policyBindings = []schema.GroupVersionResource{
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1", Resource: "mutatingadmissionpolicybindings"},
}

// Uninstall removes the admission path first, then hands back every pending pod admission
// handed over and a controller recreates, until none has been handed back for Settle (each
// owner's pods once, but for admission's caches within Settle of the removal), or Timeout: what a removal must do before pool-scheduler
// goes, so nothing is left waiting for it. It returns the pods only reported (bare, Jobs').
func Uninstall(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, o UninstallOptions) ([]Result, error) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for _, name := range o.WebhookConfigurations {
		err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("removing the MutatingWebhookConfiguration %s: %w", name, err)
		}
		logger.Info("Admission path removed", "mutatingWebhookConfiguration", name)
	}
	for _, name := range o.PolicyBindings {
		for _, gvr := range policyBindings {
			// NotFound also when the version is not served (404 for the resource).
			err := dyn.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("removing the MutatingAdmissionPolicyBinding %s (%s): %w", name, gvr.Version, err)
			}
		}
		logger.Info("Admission path removed", "mutatingAdmissionPolicyBinding", name)
	}
	limiter := flowcontrol.NewTokenBucketRateLimiter(float32(o.QPS), 1)
	quiet := time.Now()
	// Within Settle of the removal an apiserver may still hand a replacement over (its admission
	// caches): handed back again. Later, a marked replacement of an owner already handed back
	// means an admission path this hook does not know still runs: reported, and it does not keep
	// the hook from settling. Unmarked pods (their template names the scheduler) are only
	// reported, so none can loop.
	owners := newOwnerMemory(time.Now, quiet.Add(o.Settle),
		"handed back once already, and its replacement was handed to the scheduler again: an admission path this uninstall did not remove still runs; remove it, then run poolctl handback")
	var last []Result
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		results, err := handback(ctx, cs, "", o.SchedulerName, false, limiter, owners)
		if err != nil {
			logger.Error(err, "Handing back failed; retrying")
			return false, nil
		}
		last = results
		for _, r := range results {
			if r.Action == "handed back" {
				logger.Info("Handed back", "pod", r.Pod, "owner", r.Owner)
				quiet = time.Now()
			}
		}
		return time.Since(quiet) >= o.Settle, nil
	})
	var reported []Result
	for _, r := range last {
		if r.Action == "reported" {
			reported = append(reported, r)
		}
	}
	if err != nil {
		return reported, errors.Join(fmt.Errorf("pods kept waiting for %s after %s", o.SchedulerName, o.Timeout), err)
	}
	return reported, nil
}

// RunUninstall is Uninstall as `pool-labeler handback` runs it (a Job: it returns when done),
// logging each pod it leaves waiting.
func RunUninstall(ctx context.Context, cfg *rest.Config, o UninstallOptions) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	reported, err := Uninstall(ctx, cs, dyn, o)
	logger := klog.FromContext(ctx)
	for _, r := range reported {
		logger.Info("Left waiting: delete and recreate it yourself", "pod", r.Pod, "owner", r.Owner, "why", r.Detail)
	}
	return err
}
