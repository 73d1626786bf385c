package handoff

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
)

// recreatingOwners are the controllers known to create a replacement for a deleted pod (by
// group/kind) at no cost: a pending pod they control can be handed back by deleting it. Others
// are only reported: a bare pod or a custom controller's could be lost, and a Job counts a pod
// deleted before it succeeded as a failure against its backoffLimit (or its podFailurePolicy
// may fail the Job), so its pods are left to you.
var recreatingOwners = map[string]bool{
	"apps/ReplicaSet":        true,
	"apps/StatefulSet":       true,
	"/ReplicationController": true,
}

// Result is what Handback did with one pod.
type Result struct {
	Pod    string `json:"pod"`
	Owner  string `json:"owner,omitempty"`
	Action string `json:"action"` // handed back, would hand back, reported, skipped
	Detail string `json:"detail"`
}

// Handback deletes the pods of namespace ("": every namespace) that wait for schedulerName
// (not bound, not terminating) and that a recreating controller owns, at most as fast as limiter
// allows, and reports every waiting pod.
func Handback(ctx context.Context, cs kubernetes.Interface, namespace, schedulerName string, dryRun bool, limiter flowcontrol.RateLimiter) ([]Result, error) {
	selector := fields.AndSelectors(fields.OneTermEqualSelector("spec.schedulerName", schedulerName), fields.OneTermEqualSelector("spec.nodeName", ""))
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	var out []Result
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Spec.NodeName != "" || p.Status.Phase != v1.PodPending {
			continue
		}
		r := Result{Pod: p.Namespace + "/" + p.Name}
		ref := metav1.GetControllerOf(p)
		if ref != nil {
			r.Owner = ref.Kind + " " + ref.Name
		}
		switch {
		case ref == nil:
			r.Action, r.Detail = "reported", "a bare pod: no controller recreates it; delete and recreate it yourself"
		case groupOf(ref.APIVersion) == "batch" && ref.Kind == "Job":
			r.Action, r.Detail = "reported", "a Job's pod: deleting it counts as a failure against the Job's backoffLimit; recreate it by hand if the Job allows"
		case !recreatingOwners[groupOf(ref.APIVersion)+"/"+ref.Kind]:
			r.Action, r.Detail = "reported", fmt.Sprintf("its controller (%s) is not known to recreate deleted pods", ref.APIVersion)
		case dryRun:
			r.Action, r.Detail = "would hand back", "its controller recreates it"
		default:
			if err := limiter.Wait(ctx); err != nil {
				return out, err
			}
			uid, rv := p.UID, p.ResourceVersion
			err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
			switch {
			case err == nil:
				r.Action, r.Detail = "handed back", "deleted; its controller recreates it"
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				r.Action, r.Detail = "skipped", "changed since it was listed (bound, or gone): left alone"
			default:
				return out, err
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}

// groupOf returns the API group of an apiVersion ("" for the core group's "v1").
func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}
