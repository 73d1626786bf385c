package aksemu

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// Outcomes.
const (
	OutcomeSucceeded = "Succeeded"
	OutcomeFailed    = "Failed"
)

// Result is what an operation did to the workloads.
type Result struct {
	Kind    string `json:"kind"`
	Outcome string `json:"outcome"`
	// Replicas is the workloads' replicas in all; the per-replica figures divide by it.
	Replicas int `json:"replicas"`
	// Evictions are the Eviction API calls that evicted a pod; Refusals those a
	// PodDisruptionBudget refused (429), each retry counted.
	Evictions           int     `json:"evictions"`
	Refusals            int     `json:"refusals"`
	EvictionsPerReplica float64 `json:"evictionsPerReplica"`
	RefusalsPerReplica  float64 `json:"refusalsPerReplica"`
	// Minutes is the maintenance's length in AKS time, from the first surge node asked for to
	// the last surge node deleted.
	Minutes float64 `json:"minutes"`
	// Floor is the fewest evictions per replica any placement could reach in this operation
	// (0: not stated): a surge upgrade's 1 + surge nodes / original nodes (the first batch's
	// replicas have only surge nodes and older nodes to go to, both drained later), a
	// blue-green upgrade's 1.
	Floor float64 `json:"floor,omitempty"`
	// BelowFloor counts workloads of 3 or more replicas that had fewer than Floor Ready at some
	// moment of the maintenance.
	BelowFloor int `json:"belowFloor"`
	// NewNodes are the nodes the operation created (surge, green or replacement nodes);
	// ReimagedNodes those it reimaged in place; RemovedNodes those it deleted.
	NewNodes         []string             `json:"newNodes"`
	ReimagedNodes    []string             `json:"reimagedNodes,omitempty"`
	RemovedNodes     []string             `json:"removedNodes,omitempty"`
	QuarantinedNodes []string             `json:"quarantinedNodes,omitempty"`
	Workloads        []MaintainedWorkload `json:"workloads"`
}

// MaintainedWorkload is one ReplicaSet through the maintenance.
type MaintainedWorkload struct {
	// Name is namespace/replicaset/name, as pkg/report names workloads.
	Name      string `json:"name"`
	Replicas  int    `json:"replicas"`
	Floor     int    `json:"floor"`
	MinReady  int    `json:"minReady"`
	PDB       bool   `json:"pdb,omitempty"`
	Evictions int    `json:"evictions"`
	Refusals  int    `json:"refusals"`
	// Timeline is its Ready replicas (not terminating and Ready, as the ReplicaSet's
	// status.readyReplicas counts them) at each change, in AKS minutes since the start.
	Timeline []ReadyPoint `json:"timeline"`
}

// ReadyPoint is a workload's Ready replicas from a moment on.
type ReadyPoint struct {
	Minute float64 `json:"minute"`
	Ready  int     `json:"ready"`
}

// Floor is the fewest Ready replicas a workload of r replicas may keep during maintenance:
// two thirds, rounded up, for 3 or more (issue #43); smaller workloads have none.
func Floor(r int) int {
	if r < 3 {
		return 0
	}
	return (2*r + 2) / 3
}

// readyTracker counts every ReplicaSet's Ready pods from a pod informer and records, once
// started, their changes and minimum.
type readyTracker struct {
	mu      sync.Mutex
	clock   func() float64 // AKS minutes since the start
	started bool
	pods    map[string]podState
	ready   map[string]int
	wl      map[string]*MaintainedWorkload
}

type podState struct {
	owner string
	ready bool
}

func ownerName(p *v1.Pod) string {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return ""
	}
	return p.Namespace + "/replicaset/" + ref.Name
}

func (t *readyTracker) observe(p *v1.Pod, deleted bool) {
	owner := ownerName(p)
	if owner == "" {
		return
	}
	key := p.Namespace + "/" + p.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.pods[key]
	now := podState{owner: owner, ready: !deleted && p.DeletionTimestamp == nil && podutil.IsPodReady(p)}
	if deleted {
		delete(t.pods, key)
	} else {
		t.pods[key] = now
	}
	if old.ready == now.ready {
		return
	}
	if now.ready {
		t.ready[owner]++
	} else {
		t.ready[owner]--
	}
	if w := t.wl[owner]; w != nil && t.started {
		w.MinReady = min(w.MinReady, t.ready[owner])
		w.Timeline = append(w.Timeline, ReadyPoint{Minute: t.clock(), Ready: t.ready[owner]})
	}
}

// start begins the record: every workload's count now is its first point and minimum.
func (t *readyTracker) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = true
	for name, w := range t.wl {
		w.MinReady = t.ready[name]
		w.Timeline = []ReadyPoint{{Minute: 0, Ready: t.ready[name]}}
	}
}

func (t *readyTracker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		return
	}
	t.started = false
	end := t.clock()
	for name, w := range t.wl {
		w.Timeline = append(w.Timeline, ReadyPoint{Minute: end, Ready: t.ready[name]})
	}
}

func (t *readyTracker) allReady() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, w := range t.wl {
		if t.ready[name] != w.Replicas {
			return false
		}
	}
	return true
}

func (t *readyTracker) observeObj(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if p, ok := obj.(*v1.Pod); ok {
		t.observe(p, deleted)
	}
}
