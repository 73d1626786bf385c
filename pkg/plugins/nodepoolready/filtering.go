package nodepoolready

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

const preFilterStateKey fwk.StateKey = "PreFilter" + Name

// waitingForNodes is PreFilter's reason while the plugin's node handler has not synced.
const waitingForNodes = "NodePoolReady is reading the nodes"

// preFilterState pins the label sets for the whole cycle, so every node is judged against one view.
type preFilterState struct {
	labelSets *pool.LabelSets
	// filterSkipped: every node was ready as far as the census knew, so Filter did not run and
	// Reserve judges the chosen node.
	filterSkipped bool
}

// Clone shares the state: it is immutable.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter pins the current label-set index into the cycle state, or skips pods that are exempt.
// When the census finds every node ready (the steady state), Filter is skipped for the cycle
// and Reserve judges the chosen node instead: the census can lag the snapshot (see census).
func (pl *NodePoolReady) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if pl.ignoreDaemonSetPods && isExempt(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !pl.census.handlerSynced() {
		// Moments after start: the node handler has not seen every node yet, so a pool labelled
		// from a set out of view may not be known, and its unlabelled nodes would pass. The pod
		// is retried once it has (see New).
		pl.waiting.remember(pod)
		return nil, fwk.NewStatus(fwk.Pending, waitingForNodes).WithPlugin(Name)
	}
	if pl.snapshot == nil {
		state.Write(preFilterStateKey, &preFilterState{labelSets: pl.labelSets.current()})
		return nil, nil
	}
	pl.verdicts.Compact(pl.snapshot)
	s := &preFilterState{labelSets: pl.labelSets.current()}
	s.filterSkipped = pl.census.allReady(s.labelSets, pl.snapshot)
	state.Write(preFilterStateKey, s)
	if s.filterSkipped {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions returns nil: readiness does not depend on other pods.
func (pl *NodePoolReady) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects nodes that are not ready, with the code Pending: such a node waits for its
// labeler, not for anything preemption could change (see the README). A node is judged once per
// version of the node and of the label sets (pl.verdicts); no allocation per node unless the
// node changed.
func (pl *NodePoolReady) Filter(ctx context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := getPreFilterState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	v := pl.verdicts.Get(node, s.labelSets)
	if v == nil {
		return nil
	}
	rejections[v.Cause].Inc()
	logDetail(klog.FromContext(ctx), node.Name, *v)
	// A new Status per rejection: the framework writes the plugin name into the returned status,
	// from the parallel Filter goroutines, so a shared one would be a data race.
	return fwk.NewStatus(fwk.Pending, v.Cause.String()).WithPlugin(Name)
}

func getPreFilterState(state fwk.CycleState) (*preFilterState, error) {
	c, err := state.Read(preFilterStateKey)
	if err != nil {
		return nil, err
	}
	return c.(*preFilterState), nil
}

func isExempt(pod *v1.Pod) bool { return pool.IsDaemonSetPod(pod) }

// Reserve judges the chosen node when Filter was skipped: the census found every node ready,
// but the snapshot may hold a version it had not judged yet. A node that is not ready refuses
// the pod, becomes a suspect (so the following cycles run Filter while the snapshot holds it),
// and the pod is activated (only this node was wrong, not the others): the queue retries it
// after its backoff, 1 s on a first attempt (v1.34 requeues a ForceActivate of an in-flight pod
// after backoff), instead of leaving it to wait for an event on this node.
func (pl *NodePoolReady) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := getPreFilterState(state)
	if err != nil || !s.filterSkipped {
		// Exempt pods have no state; otherwise Filter judged the node in this cycle's snapshot.
		return nil
	}
	ni, err := pl.snapshot.Get(nodeName)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: chosen node %q: %w", Name, nodeName, err))
	}
	// Judged directly, not through the memo: Filter did not run, so the memo holds few nodes, and
	// one entry per chosen node would have it rebuilt every few dozen cycles.
	node := ni.Node()
	verdict := pl.gate.Check(node.Labels, node.Annotations, s.labelSets)
	if verdict.Ready() {
		return nil
	}
	v := &verdict
	pl.census.suspect(node)
	rejections[v.Cause].Inc()
	lateRejections.Inc()
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Chosen node is not ready, retrying the pod with Filter on", "plugin", Name, "pod", klog.KObj(pod),
		"node", nodeName, "reason", v.Cause.String())
	logDetail(logger, nodeName, *v)
	if pl.handle != nil {
		pl.handle.Activate(logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	}
	return fwk.NewStatus(fwk.Pending, v.Cause.String()).WithPlugin(Name)
}

// Unreserve has nothing to undo.
func (pl *NodePoolReady) Unreserve(context.Context, fwk.CycleState, *v1.Pod, string) {}
