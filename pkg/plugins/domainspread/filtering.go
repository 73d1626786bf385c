package domainspread

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
)

const stateKey fwk.StateKey = "PreFilter" + Name

// PreFilter counts the workload's replicas per eligible domain (Hard mode). Soft mode and pods
// without a workload skip Filter entirely.
func (pl *DomainSpread) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if !pl.hard {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	w, ok := pl.workloadToSpread(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s, err := pl.countReplicas(ctx, pod, w, true)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("%s: counting replicas: %w", Name, err))
	}
	state.Write(stateKey, s)
	// Until it is placed: a replica going away activates it (see waitingReplicas).
	pl.waiting.remember(w, pod)
	return nil, nil
}

// PreFilterExtensions keeps the counts right while preemption adds and removes pods.
func (pl *DomainSpread) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod counts a pod preemption puts back.
func (pl *DomainSpread) AddPod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfo fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	return pl.adjust(state, podInfo.GetPod(), nodeInfo, 1)
}

// RemovePod uncounts a pod preemption removes.
func (pl *DomainSpread) RemovePod(_ context.Context, state fwk.CycleState, _ *v1.Pod, podInfo fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	return pl.adjust(state, podInfo.GetPod(), nodeInfo, -1)
}

func (pl *DomainSpread) adjust(state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo, delta int32) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !s.workload.isReplica(pod) {
		return nil
	}
	ids := pl.domainIDs(nodeInfo.Node(), s.epoch)
	for d := range pl.dims {
		// Only domains the pod may use are counted (and only they exist in Hard mode's state).
		if id := ids[d]; id != noDomain && int(id) < len(s.perDomain[d]) && s.perDomain[d][id] != ineligible {
			// Never below 0: a victim assumed by another profile may not be in the counts.
			s.perDomain[d][id] = max(s.perDomain[d][id]+delta, 0)
		}
	}
	s.updateMinimum(len(pl.dims))
	return nil
}

// Filter (Hard mode) rejects a node where one more replica would make a dimension's skew, the
// replicas of the node's domain minus those of the least loaded eligible domain, exceed maxSkew.
// Skew rather than anti-affinity: 4 replicas on 3 update domains still schedule.
func (pl *DomainSpread) Filter(ctx context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	ids := pl.domainIDs(nodeInfo.Node(), s.epoch)
	for d := range pl.dims {
		id := ids[d]
		if id == noDomain {
			if pl.rejectNodesMissingKeys {
				pl.rejections[d].Inc()
				return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonMissingKey).WithPlugin(Name)
			}
			continue
		}
		if skew := s.inDomain(d, id) + 1 - s.minimum[d]; skew > pl.maxSkew {
			pl.rejections[d].Inc()
			if l := klog.FromContext(ctx).V(4); l.Enabled() {
				l.Info("Node would exceed the replica skew", "plugin", Name, "node", nodeInfo.Node().Name,
					"dimension", pl.dims[d].name, "domain", pl.domains.value(d, id), "skew", skew, "maxSkew", pl.maxSkew)
			}
			// Unschedulable, not unresolvable: preempting replicas of the workload can lower the skew.
			// A new Status per rejection: the framework writes the plugin name into it from the
			// parallel Filter goroutines.
			return fwk.NewStatus(fwk.Unschedulable, ErrReasonSkew).WithPlugin(Name)
		}
	}
	return nil
}

func readState(state fwk.CycleState) (*spreadState, error) {
	c, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: reading cycle state: %w", Name, err)
	}
	s, ok := c.(*spreadState)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected cycle state %T", Name, c)
	}
	return s, nil
}
