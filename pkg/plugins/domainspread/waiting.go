package domainspread

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// maxWaiting bounds the pods remembered; beyond it they are forgotten and rely on the hints,
// their backoff and the scheduler's periodic flush.
const maxWaiting = 10000

// waitingReplicas remembers, per workload, the pods a Hard-mode cycle has counted replicas for
// and that have not been placed yet. When the replica index uncounts a replica of the workload
// (deleted, terminating, finished), they are activated.
//
// Queueing hints only decide; they do not update the index. The scheduler calls the hint on
// its own informer goroutine and may retry the pod at once, before this plugin's pod handler
// (another goroutine of the same informer) has uncounted the replica: that attempt sees the old
// count and refuses the pod again, and the hint's event is spent. Activating the workload's
// pods from the handler, once the count is right, retries them then; a pod still in its cycle
// is requeued when the cycle ends (the queue records the activation for in-flight pods).
type waitingReplicas struct {
	mu   sync.Mutex
	pods map[workload]map[types.UID]*v1.Pod
	n    int
}

func (w *waitingReplicas) remember(wl workload, pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods == nil || w.n >= maxWaiting {
		w.pods, w.n = map[workload]map[types.UID]*v1.Pod{}, 0
	}
	byUID := w.pods[wl]
	if byUID == nil {
		byUID = map[types.UID]*v1.Pod{}
		w.pods[wl] = byUID
	}
	if _, ok := byUID[pod.UID]; !ok {
		w.n++
	}
	byUID[pod.UID] = pod
}

func (w *waitingReplicas) forget(wl workload, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if byUID := w.pods[wl]; byUID != nil {
		if _, ok := byUID[uid]; ok {
			delete(byUID, uid)
			w.n--
			if len(byUID) == 0 {
				delete(w.pods, wl)
			}
		}
	}
}

// take removes and returns wl's remembered pods, keyed as Handle.Activate wants them.
func (w *waitingReplicas) take(wl workload) map[string]*v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	byUID := w.pods[wl]
	if len(byUID) == 0 {
		return nil
	}
	delete(w.pods, wl)
	w.n -= len(byUID)
	out := make(map[string]*v1.Pod, len(byUID))
	for _, pod := range byUID {
		out[pod.Namespace+"/"+pod.Name] = pod
	}
	return out
}

// replicaUncounted activates the pods waiting for wl; the replica index calls it after it
// uncounted one of wl's replicas.
func (pl *DomainSpread) replicaUncounted(logger klog.Logger, wl workload) {
	if pl.handle == nil {
		return
	}
	if pods := pl.waiting.take(wl); len(pods) > 0 {
		logger.V(4).Info("A replica went away, retrying its workload's pending pods", "plugin", Name, "namespace", wl.namespace, "pods", len(pods))
		pl.handle.Activate(logger, pods)
	}
}
