package spread

import (
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeletionCostAnnotation is the annotation the ReplicaSet controller ranks pods by when it
// scales down (k8s.io/kubernetes pkg/controller/controller_utils.go ActivePodsWithRanks.Less,
// criterion 4: lower cost first; after unassigned, phase and readiness, before co-location
// and age). DomainSpread sets it in the binding of a replica it places; the spread keeper
// corrects it afterwards; neither writes any other field of a pod.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// DeletionCostStep is the distance between two deletion costs written afresh: the binding gives
// each new replica the workload's lowest cost minus it, and the keeper renumbers that far apart,
// leaving room to place later replicas between two others without rewriting either.
const DeletionCostStep = 1 << 10

// DeletionCostOwner returns the controller of pod whose scale-downs read the deletion cost: a
// ReplicaSet or a ReplicationController (the only controllers that rank by it); false otherwise.
func DeletionCostOwner(pod *v1.Pod) (*metav1.OwnerReference, bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || (ref.Kind != "ReplicaSet" && ref.Kind != "ReplicationController") {
		return nil, false
	}
	return ref, true
}

// DeletionCostOf is the cost the ReplicaSet controller ranks pod by, and whether the pod carries
// one: like the controller (pkg/apis/core/helper GetDeletionCostFromPodAnnotations), 0 without the annotation or
// with a value that is not an int32.
func DeletionCostOf(pod *v1.Pod) (int32, bool) {
	v, ok := pod.Annotations[DeletionCostAnnotation]
	if !ok {
		return 0, false
	}
	c, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(c), true
}

// NextDeletionCost is the cost of a replica placed after others whose lowest cost is lowest:
// DeletionCostStep below it, so a scale-down removes replicas in the reverse order of their
// placement and passes through the states the placements built. False when no such int32 cost
// is left (the keeper then renumbers the workload).
func NextDeletionCost(lowest int32) (int32, bool) {
	next := int64(lowest) - DeletionCostStep
	if next < math.MinInt32 {
		return 0, false
	}
	return int32(next), true
}
