// Package nodepoolready implements the NodePoolReady scheduler plugin: it keeps pods off nodes
// whose pool labels are not applied yet (labels that arrive after the node joins), so that node
// affinity, anti-affinity and pool conventions are never bypassed in that window.
package nodepoolready

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/internal/nodememo"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = config.NodePoolReadyName

// NodePoolReady filters out nodes whose pool state is not applied; see pool.Gate for the rules.
type NodePoolReady struct {
	gate                pool.Gate
	labelSets           *labelSetIndex
	ignoreDaemonSetPods bool
	handle              framework.Handle
	waiting             waitingPods
	// verdicts remembers gate.Check per node version and label-set index (nil: ready).
	verdicts *nodememo.Memo[*pool.LabelSets, *pool.Verdict]
	snapshot nodememo.NodeGetter
	// census lets PreFilter skip Filter while every node is ready.
	census *census
	// reactivateAfter: see activateForNode (0: activate once).
	reactivateAfter time.Duration
	// removeNodeHandler unregisters the node handler New added to the scheduler's informer.
	removeNodeHandler func() error
}

var (
	_ framework.PreFilterPlugin   = &NodePoolReady{}
	_ framework.FilterPlugin      = &NodePoolReady{}
	_ framework.PostFilterPlugin  = &NodePoolReady{}
	_ framework.ReservePlugin     = &NodePoolReady{}
	_ framework.EnqueueExtensions = &NodePoolReady{}
	_ io.Closer                   = &NodePoolReady{}
)

// Name returns the plugin's name.
func (pl *NodePoolReady) Name() string { return Name }

// New builds the plugin from its args and starts the NodePoolLabelSet informer. It blocks until
// the informer has synced (or ctx ends): scheduling with an empty view of the label sets would
// let pods onto nodes that are not ready. It knows SystemPoolGuard's default args; a profile
// with others gets NewWithSystemArgs (the registry's RegistryFor).
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return newWithSystemArgs(ctx, obj, h, configscheme.DefaultSystemPoolGuardArgs())
}

// NewWithSystemArgs returns New for a profile whose SystemPoolGuard args are system (defaulted,
// validated): a NodePoolLabelSet label on a key its systemNodeSelector reads is ignored and
// reported, not waited for, since the labeler may not write it (pool.RefusedKey).
func NewWithSystemArgs(system *config.SystemPoolGuardArgs) func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		return newWithSystemArgs(ctx, obj, h, system)
	}
}

func newWithSystemArgs(ctx context.Context, obj runtime.Object, h framework.Handle, system *config.SystemPoolGuardArgs) (framework.Plugin, error) {
	args, err := getArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := validation.ValidateNodePoolReadyArgs(field.NewPath("args"), args); err != nil {
		return nil, err
	}
	registerMetrics()
	idx := newLabelSetIndex(args.LabelSetNamespaces)
	pl := newPlugin(args, idx)
	pl.gate = pool.NewGateWithSystemArgs(args, system)
	idx.systemNodeKeys = pl.gate.SystemNodeKeys
	pl.handle = h
	if h.SnapshotSharedLister() != nil {
		pl.snapshot = h.SnapshotSharedLister().NodeInfos()
	}
	logger := klog.FromContext(ctx)
	idx.onInformerChange = func() {
		pl.census.recount()
		pl.activateWaiting(logger)
	}
	// The recorder is asked for when an event is due, not before: a handle may have none.
	recorder := func() events.EventRecorder { return h.EventRecorder() }
	idx.onNotVisible = notVisibleReporter(logger, args.LabelSetNamespaces, recorder)
	if f := h.SharedInformerFactory(); f != nil {
		if err := pl.watchNodes(logger, f); err != nil {
			return nil, err
		}
	}
	if err := idx.startInformer(ctx, h.KubeConfig()); err != nil {
		return nil, err
	}
	var unread *unreadSets
	if len(args.LabelSetNamespaces) > 0 && h.KubeConfig() != nil {
		unread = newUnreadSets(args.LabelSetNamespaces, idx.watches, recorder)
		unread.onChange = func(pools map[string][]string) { idx.setUnread(pools) }
	}
	go func() {
		if pl.census.hasSynced != nil {
			if !cache.WaitForCacheSync(ctx.Done(), pl.census.hasSynced) {
				return
			}
			// Pods PreFilter put off while the node handler was syncing.
			pl.activateWaiting(logger)
		}
		// Once the scheduler's informers run: kube-scheduler starts recording events just
		// before it starts them, and drops what is recorded earlier.
		if unread != nil {
			if err := unread.start(ctx, h.KubeConfig()); err != nil {
				logger.Error(err, "Not reporting NodePoolLabelSets outside labelSetNamespaces", "plugin", Name)
			}
		}
	}()
	return pl, nil
}

// watchNodes feeds the census and wakes waiting pods from the scheduler's node informer.
func (pl *NodePoolReady) watchNodes(logger klog.Logger, f informers.SharedInformerFactory) error {
	informer := f.Core().V1().Nodes().Informer()
	reg, err := informer.AddEventHandler(pl.nodeReadyHandler(logger))
	if err != nil {
		return fmt.Errorf("%s: watching nodes: %w", Name, err)
	}
	pl.removeNodeHandler = func() error { return informer.RemoveEventHandler(reg) }
	pl.census.hasSynced = reg.HasSynced
	lister := f.Core().V1().Nodes().Lister()
	pl.census.list = func() ([]*v1.Node, error) { return lister.List(labels.Everything()) }
	return nil
}

// Close stops feeding the census and waking waiting pods; the framework closes its plugins when
// the scheduler stops. The NodePoolLabelSet informer stops with the context New was given.
func (pl *NodePoolReady) Close() error {
	if pl.removeNodeHandler == nil {
		return nil
	}
	return pl.removeNodeHandler()
}

func newPlugin(args *config.NodePoolReadyArgs, idx *labelSetIndex) *NodePoolReady {
	pl := &NodePoolReady{
		gate:                pool.NewGate(args),
		labelSets:           idx,
		ignoreDaemonSetPods: args.IgnoreDaemonSetPods,
		reactivateAfter:     defaultReactivateAfter,
	}
	idx.identity = pl.gate.Identity
	// A ready node is remembered as nil: small map entries keep the lookup that Filter does
	// for every node in every cycle in cache.
	pl.verdicts = nodememo.New(func(node *v1.Node, sets *pool.LabelSets) *pool.Verdict {
		if v := pl.gate.Check(node.Labels, node.Annotations, sets); !v.Ready() {
			return &v
		}
		return nil
	})
	pl.census = newCensus(func(node *v1.Node, sets *pool.LabelSets) bool {
		return pl.gate.Check(node.Labels, node.Annotations, sets).Ready()
	}, idx.current)
	return pl
}

func getArgs(obj runtime.Object) (*config.NodePoolReadyArgs, error) {
	if obj == nil {
		return nil, fmt.Errorf("%s: args are missing: run the scheduler with its config scheme registered", Name)
	}
	args, ok := obj.(*config.NodePoolReadyArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type NodePoolReadyArgs, got %T", Name, obj)
	}
	return args, nil
}

func logDetail(logger klog.Logger, node string, v pool.Verdict) {
	if l := logger.V(4); l.Enabled() {
		l.Info("Node is not ready for pods", "plugin", Name, "node", node, "reason", v.Cause.String(),
			"pool", v.Pool, "key", v.Key, "want", v.Want, "got", v.Got)
	}
}
