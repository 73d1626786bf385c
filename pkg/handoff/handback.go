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
		if !Waiting(p, schedulerName) {
			continue
		}
		r := Result{Pod: p.Namespace + "/" + p.Name}
		if ref := metav1.GetControllerOf(p); ref != nil {
			r.Owner = ref.Kind + " " + ref.Name
		}
		class, detail := Classify(p)
		switch {
		case class != OwnerRecreatable:
			r.Action, r.Detail = "reported", detail
		case dryRun:
			r.Action, r.Detail = "would hand back", detail
		default:
			if err := limiter.Wait(ctx); err != nil {
				return out, err
			}
			deleted, err := deleteAsListed(ctx, cs, p)
			switch {
			case err != nil:
				return out, err
			case deleted:
				r.Action, r.Detail = "handed back", "deleted; its controller recreates it"
			default:
				r.Action, r.Detail = "skipped", "changed since it was listed (bound, or gone): left alone"
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}

// Owner classes of a waiting pod (the owner label of pool_scheduler_handoff_waiting_pods).
const (
	// OwnerRecreatable: a ReplicaSet, StatefulSet or ReplicationController recreates it.
	OwnerRecreatable = "recreatable"
	// OwnerJob: a Job's pod, only reported (a deleted pod counts against its backoffLimit).
	OwnerJob = "job"
	// OwnerBare: no controller; only reported.
	OwnerBare = "bare"
	// OwnerOther: a controller not known to recreate deleted pods; only reported.
	OwnerOther = "other"
)

// OwnerClasses lists the owner classes, for metrics.
var OwnerClasses = []string{OwnerRecreatable, OwnerJob, OwnerBare, OwnerOther}

// Waiting reports whether p waits for schedulerName: names it, not bound, pending and not
// terminating.
func Waiting(p *v1.Pod, schedulerName string) bool {
	return p.Spec.SchedulerName == schedulerName && p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == v1.PodPending
}

// Classify says whether deleting the waiting pod p hands it back (OwnerRecreatable: its
// controller recreates it, through admission again), and if not, why.
func Classify(p *v1.Pod) (class, detail string) {
	ref := metav1.GetControllerOf(p)
	switch {
	case ref == nil:
		return OwnerBare, "a bare pod: no controller recreates it; delete and recreate it yourself"
	case groupOf(ref.APIVersion) == "batch" && ref.Kind == "Job":
		return OwnerJob, "a Job's pod: deleting it counts as a failure against the Job's backoffLimit; recreate it by hand if the Job allows"
	case !recreatingOwners[groupOf(ref.APIVersion)+"/"+ref.Kind]:
		return OwnerOther, fmt.Sprintf("its controller (%s %s) is not known to recreate deleted pods", ref.APIVersion, ref.Kind)
	}
	return OwnerRecreatable, "its controller recreates it"
}

// deleteAsListed deletes p only as it was listed (UID and resourceVersion preconditions): a pod
// bound or changed since is never touched (deleted false, no error).
func deleteAsListed(ctx context.Context, cs kubernetes.Interface, p *v1.Pod) (deleted bool, err error) {
	uid, rv := p.UID, p.ResourceVersion
	err = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// groupOf returns the API group of an apiVersion ("" for the core group's "v1").
func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}
