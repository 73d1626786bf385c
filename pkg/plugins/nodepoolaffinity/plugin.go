// Package nodepoolaffinity implements the NodePoolAffinity scheduler plugin: a pod whose required
// node selection pins it to pools (a nodeSelector entry on a pool label key, or an In expression
// on one in every required node-affinity term) is filtered only on those pools' nodes. The
// in-tree NodeAffinity narrows the search only for metadata.name, so for a pod pinned to a small
// pool in a large cluster it filters every node on every cycle; this plugin's PreFilterResult
// saves that, and never drops a node NodeAffinity would accept.
package nodepoolaffinity

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = config.NodePoolAffinityName

// NodePoolAffinity narrows a pool-pinned pod's search to its pools' nodes.
type NodePoolAffinity struct {
	keys  []string
	nodes framework.NodeInfoLister
	index *index
}

var (
	_ framework.PreFilterPlugin   = &NodePoolAffinity{}
	_ framework.EnqueueExtensions = &NodePoolAffinity{}
)

// Name returns the plugin's name.
func (pl *NodePoolAffinity) Name() string { return Name }

// New builds the plugin from its args.
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if obj == nil {
		return nil, fmt.Errorf("%s: args are missing: run the scheduler with its config scheme registered", Name)
	}
	args, ok := obj.(*config.NodePoolAffinityArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type NodePoolAffinityArgs, got %T", Name, obj)
	}
	if err := validation.ValidateNodePoolAffinityArgs(field.NewPath("args"), args); err != nil {
		return nil, err
	}
	pl := &NodePoolAffinity{keys: append([]string(nil), args.PoolLabelKeys...), index: newIndex(args.PoolLabelKeys)}
	if h != nil && h.SnapshotSharedLister() != nil {
		pl.nodes = h.SnapshotSharedLister().NodeInfos()
	}
	return pl, nil
}

// PreFilter returns the nodes of the pools the pod is pinned to, as the cycle's snapshot holds
// them, or Skip when the pod is pinned to none (or narrowing would not help: see candidates).
func (pl *NodePoolAffinity) PreFilter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	if pl.nodes == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	names := pl.candidates(pod)
	if names == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &framework.PreFilterResult{NodeNames: names}, nil
}

// PreFilterExtensions returns nil: the pools' nodes do not depend on other pods.
func (pl *NodePoolAffinity) PreFilterExtensions() framework.PreFilterExtensions { return nil }
