package handoff

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
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
// (not bound, not gated, not terminating), that admission handed over (HandedOver) and that a
// recreating controller owns, at most as fast as limiter allows, and reports every other waiting
// pod: one whose own template names the scheduler would come back naming it again.
func Handback(ctx context.Context, cs kubernetes.Interface, namespace, schedulerName string, dryRun bool, limiter flowcontrol.RateLimiter) ([]Result, error) {
	return handback(ctx, cs, namespace, schedulerName, dryRun, limiter, nil)
}

func handback(ctx context.Context, cs kubernetes.Interface, namespace, schedulerName string, dryRun bool, limiter flowcontrol.RateLimiter, owners *ownerMemory) ([]Result, error) {
	selector := fields.AndSelectors(fields.OneTermEqualSelector("spec.schedulerName", schedulerName), fields.OneTermEqualSelector("spec.nodeName", ""))
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	var waiting []*v1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; Waiting(p, schedulerName) {
			waiting = append(waiting, p)
		}
	}
	byOwner := waitingByOwner(waiting)
	var out []Result
	for _, p := range waiting {
		r := Result{Pod: p.Namespace + "/" + p.Name}
		ref := metav1.GetControllerOf(p)
		if ref != nil {
			r.Owner = ref.Kind + " " + ref.Name
		}
		class, detail := Classify(p)
		if class == OwnerRecreatable && !HandedOver(p, schedulerName) {
			class, detail = "", NotHandedOverDetail(schedulerName)
		}
		if class == OwnerRecreatable && owners != nil {
			if ok, why := owners.again(p, ref.UID); !ok {
				class, detail = "", why
			}
		}
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
				if owners != nil {
					owners.record(ref.UID, p.UID, byOwner[ref.UID])
				}
			default:
				r.Action, r.Detail = "skipped", "changed since it was listed (bound, or gone): left alone"
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}

// NotHandedOverDetail says why a recreatable pod without the marker is not handed back.
func NotHandedOverDetail(schedulerName string) string {
	return fmt.Sprintf("admission did not hand it over (no %s annotation): its own template names %s, so its replacement would wait for it again; run %s, or change the template's schedulerName",
		profile.HandedOverAnnotation, schedulerName, schedulerName)
}

// HandedOver reports whether admission handed p to schedulerName (profile.HandedOverAnnotation,
// set with its schedulerName): only such a pod comes back for the default scheduler when
// recreated while the hand-off is off.
func HandedOver(p *v1.Pod, schedulerName string) bool {
	return p.Annotations[profile.HandedOverAnnotation] == schedulerName
}

// ownerMemory holds the owners (controllers) whose pods were handed back, and their pods known
// then (those that waited when the first was handed back, and those deleted): any other pod of
// such an owner is a replacement that waits again, and is reported, not deleted. The memory is
// scoped to an outage (an epoch): once the leader is judged healthy again, even briefly, pods
// handed over then are handed back like any other if it fails again; only a replacement that
// waits again within the same outage is held (it can only have been handed over by a way in that
// judged differently, and deleting it again could loop).
type ownerMemory struct {
	mu    sync.Mutex
	known map[types.UID]ownerEntry
	epoch int
	now   func() time.Time
	// againUntil: a replacement is handed back again only before this (zero: never).
	againUntil time.Time
	// detail explains a replacement not handed back again.
	detail string
}

type ownerEntry struct {
	epoch int
	pods  sets.Set[types.UID]
}

func newOwnerMemory(now func() time.Time, againUntil time.Time, detail string) *ownerMemory {
	return &ownerMemory{known: map[types.UID]ownerEntry{}, now: now, againUntil: againUntil, detail: detail}
}

// record notes that pod, of owner, was handed back; at owner's first in this outage, waiting
// are its pods that wait now: they are not replacements (later ones are).
func (m *ownerMemory) record(owner, pod types.UID, waiting []types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.known[owner]
	if !ok || e.epoch != m.epoch {
		e = ownerEntry{epoch: m.epoch, pods: sets.New(waiting...)}
		m.known[owner] = e
	}
	e.pods.Insert(pod)
}

// replacement reports whether pod is a replacement: a pod of an owner handed back in this
// outage, not known then.
func (m *ownerMemory) replacement(owner, pod types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.known[owner]
	return ok && e.epoch == m.epoch && !e.pods.Has(pod)
}

// again reports whether p, of owner, is handed back: yes unless it is a replacement past
// againUntil; if not, why.
func (m *ownerMemory) again(p *v1.Pod, owner types.UID) (bool, string) {
	if !m.replacement(owner, p.UID) || m.now().Before(m.againUntil) {
		return true, ""
	}
	return false, m.detail
}

// recovered ends the outage: the leader was judged healthy again.
func (m *ownerMemory) recovered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
}

func (m *ownerMemory) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.known)
}

// waitingByOwner groups the UIDs of pods by their controller's UID.
func waitingByOwner(pods []*v1.Pod) map[types.UID][]types.UID {
	out := map[types.UID][]types.UID{}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil {
			out[ref.UID] = append(out[ref.UID], p.UID)
		}
	}
	return out
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

// Waiting reports whether p waits for schedulerName: names it, not bound, pending, not
// terminating and not gated. A pod with scheduling gates (spec.schedulingGates, e.g. Kueue's
// admission) waits for whoever holds the gate, not for the scheduler: it is neither counted nor
// handed back, which would lose its place in that queue.
func Waiting(p *v1.Pod, schedulerName string) bool {
	return p.Spec.SchedulerName == schedulerName && p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == v1.PodPending &&
		len(p.Spec.SchedulingGates) == 0
}

// trimWaitingPod keeps of a pod what the controller reads (Waiting, HandedOver, Classify,
// deleteAsListed, its events and the heartbeat's resource versions): in an outage every pod of
// the cluster may wait in its cache, so containers, volumes, managed fields and other
// annotations are dropped (docs/operations.md has the measurement).
func trimWaitingPod(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	t := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp, OwnerReferences: p.OwnerReferences},
		Spec:   v1.PodSpec{SchedulerName: p.Spec.SchedulerName, NodeName: p.Spec.NodeName, SchedulingGates: p.Spec.SchedulingGates},
		Status: v1.PodStatus{Phase: p.Status.Phase},
	}
	if v, ok := p.Annotations[profile.HandedOverAnnotation]; ok {
		t.Annotations = map[string]string{profile.HandedOverAnnotation: v}
	}
	return t, nil
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
