// Package domainspread implements the DomainSpread scheduler plugin: it spreads the replicas of
// every workload (the pods of one controller) over an ordered list of topology dimensions, by
// default fault domain, update domain and host, without any change to pod specs.
package domainspread

import (
	"context"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/internal/nodememo"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = config.DomainSpreadName

// Fixed rejection reasons (Hard mode), so FailedScheduling events aggregate.
const (
	ErrReasonSkew       = "node would exceed the workload's maximum replica skew"
	ErrReasonMissingKey = "node lacks a spread dimension's label"
)

// DomainSpread scores (and in Hard mode filters) nodes by how many replicas of the pod's
// workload their domains already hold.
type DomainSpread struct {
	dims                      []dimension
	hard                      bool
	maxSkew                   int32
	spreadPodsWithConstraints bool
	rejectNodesMissingKeys    bool
	deletionCostAtBind        bool

	rejections   []metrics.CounterMetric
	sharedLister framework.SharedLister

	// domains numbers the domains; nodeDomains remembers each node version's domain IDs.
	domains     domainTable
	nodeDomains *nodememo.Memo[uint64, nodeDomains]
	// replicas counts every workload's replicas per node, fed by podInformer.
	replicas    *replicaIndex
	podInformer cache.SharedIndexInformer
	// waiting and handle: pods to activate when a replica of their workload goes away.
	waiting waitingReplicas
	handle  framework.Handle
	// rollouts follows the pools' upgrades, fed by nodeInformer: while a pool upgrades, a
	// replica is placed on a node that stays rather than one the upgrade drains (scoring.go).
	// The same handler numbers each node's domains as it joins or changes (numberDomains).
	rollouts     *maintenance.Rollouts
	nodeInformer cache.SharedIndexInformer
	nodeReg      cache.ResourceEventHandlerRegistration
}

var (
	_ framework.PreFilterPlugin   = &DomainSpread{}
	_ framework.FilterPlugin      = &DomainSpread{}
	_ framework.PreScorePlugin    = &DomainSpread{}
	_ framework.ScorePlugin       = &DomainSpread{}
	_ framework.ScoreExtensions   = &DomainSpread{}
	_ framework.ReservePlugin     = &DomainSpread{}
	_ framework.BindPlugin        = &DomainSpread{}
	_ io.Closer                   = &DomainSpread{}
	_ framework.EnqueueExtensions = &DomainSpread{}
)

// Name returns the plugin's name.
func (pl *DomainSpread) Name() string { return Name }

// New builds the plugin from its args.
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args, ok := obj.(*config.DomainSpreadArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type DomainSpreadArgs, got %T", Name, obj)
	}
	if err := validation.ValidateDomainSpreadArgs(field.NewPath("args"), args); err != nil {
		return nil, err
	}
	if h.SnapshotSharedLister() == nil {
		return nil, fmt.Errorf("%s: the framework has no snapshot lister", Name)
	}
	if h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s: the framework has no informer factory", Name)
	}
	registerMetrics()
	pl := &DomainSpread{
		hard:                      args.Mode == config.SpreadHard,
		maxSkew:                   args.MaxSkew,
		spreadPodsWithConstraints: args.SpreadPodsWithConstraints,
		rejectNodesMissingKeys:    args.RejectNodesMissingKeys,
		deletionCostAtBind:        args.DeletionCostAtBind,
		sharedLister:              h.SnapshotSharedLister(),
	}
	for _, d := range args.Dimensions {
		pl.dims = append(pl.dims, dimension{name: d.Name, keys: append([]string(nil), d.LabelKeys...), joint: d.Joint})
	}
	pl.rejections = rejectionCounters(pl.dims)
	pl.nodeDomains = nodememo.New(pl.resolve)
	pl.replicas = newReplicaIndex()
	pl.handle = h
	logger := klog.FromContext(ctx)
	pl.replicas.uncounted = func(w workload) { pl.replicaUncounted(logger, w) }
	pl.replicas.placedOrGone = pl.waiting.forget
	// The scheduler's pod informer (succeeded and failed pods filtered out); the scheduler
	// starts it after building its profiles.
	pl.podInformer = h.SharedInformerFactory().Core().V1().Pods().Informer()
	reg, err := pl.podInformer.AddEventHandler(pl.replicas.handler(logger))
	if err != nil {
		return nil, fmt.Errorf("%s: watching pods: %w", Name, err)
	}
	pl.replicas.registration = reg
	pl.rollouts = maintenance.NewRollouts(pool.Identity{})
	pl.nodeInformer = h.SharedInformerFactory().Core().V1().Nodes().Informer()
	if pl.nodeReg, err = pl.nodeInformer.AddEventHandler(pl.nodeHandler()); err != nil {
		return nil, fmt.Errorf("%s: watching nodes: %w", Name, err)
	}
	return pl, nil
}

// nodeHandler feeds node events to the rollout tracker and numbers the domains of every node
// that joins or changes.
func (pl *DomainSpread) nodeHandler() cache.ResourceEventHandler {
	r := pl.rollouts
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				r.Upsert(n)
				pl.numberDomains(n)
			}
		},
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*v1.Node); ok {
				r.Upsert(n)
				pl.numberDomains(n)
			}
		},
		DeleteFunc: func(obj any) {
			switch o := obj.(type) {
			case *v1.Node:
				r.Delete(o.Name)
			case cache.DeletedFinalStateUnknown:
				if n, ok := o.Obj.(*v1.Node); ok {
					r.Delete(n.Name)
				}
			}
		},
	}
}

// Close stops feeding the replica index; the framework closes its plugins when it stops.
func (pl *DomainSpread) Close() error {
	return errors.Join(pl.podInformer.RemoveEventHandler(pl.replicas.registration), pl.nodeInformer.RemoveEventHandler(pl.nodeReg))
}
