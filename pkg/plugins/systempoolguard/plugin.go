// Package systempoolguard implements the SystemPoolGuard scheduler plugin: user pods never land on
// the system pool, even where the pool can only carry a PreferNoSchedule taint, is marked by a
// label, or pods carry wildcard tolerations; system pods prefer the system pool.
package systempoolguard

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/internal/nodememo"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = config.SystemPoolGuardName

// ErrReasonSystemPool is the fixed reason user pods see for system nodes.
const ErrReasonSystemPool = "node is in the system pool"

// SystemPoolGuard filters system nodes out for user pods and steers system pods to them.
type SystemPoolGuard struct {
	policy pool.SystemPolicy
	// classes remembers policy.ClassifyNode per node version.
	classes  *nodememo.Memo[struct{}, pool.SystemNodeReason]
	snapshot nodememo.NodeGetter
}

var (
	_ framework.PreFilterPlugin   = &SystemPoolGuard{}
	_ framework.FilterPlugin      = &SystemPoolGuard{}
	_ framework.PreScorePlugin    = &SystemPoolGuard{}
	_ framework.ScorePlugin       = &SystemPoolGuard{}
	_ framework.EnqueueExtensions = &SystemPoolGuard{}
)

// Name returns the plugin's name.
func (pl *SystemPoolGuard) Name() string { return Name }

// New builds the plugin from its args.
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args, ok := obj.(*config.SystemPoolGuardArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type SystemPoolGuardArgs, got %T", Name, obj)
	}
	if err := validation.ValidateSystemPoolGuardArgs(field.NewPath("args"), args); err != nil {
		return nil, err
	}
	registerMetrics()
	pl, err := newPlugin(args)
	if err != nil {
		return nil, err
	}
	if h != nil && h.SnapshotSharedLister() != nil {
		pl.snapshot = h.SnapshotSharedLister().NodeInfos()
	}
	return pl, nil
}

func newPlugin(args *config.SystemPoolGuardArgs) (*SystemPoolGuard, error) {
	policy, err := pool.NewSystemPolicy(args)
	if err != nil {
		return nil, fmt.Errorf("%s: args.%w", Name, err)
	}
	pl := &SystemPoolGuard{policy: policy}
	pl.classes = nodememo.New(func(node *v1.Node, _ struct{}) pool.SystemNodeReason {
		return pl.policy.ClassifyNode(node.Labels)
	})
	return pl, nil
}

// classify is policy.ClassifyNode for the node, remembered per node version.
func (pl *SystemPoolGuard) classify(node *v1.Node) pool.SystemNodeReason {
	return pl.classes.Get(node, struct{}{})
}

// compact folds node versions classified in earlier cycles into the memo's read table.
func (pl *SystemPoolGuard) compact() {
	if pl.snapshot != nil {
		pl.classes.Compact(pl.snapshot)
	}
}
