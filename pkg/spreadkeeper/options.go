package spreadkeeper

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
)

// Options configure `pool-labeler spread`: the deletion-cost keeper, the rebalancer and the
// budget floor.
type Options struct {
	// Profile is the scheduler's configuration (--config, --scheduler-name), decoded once by
	// the caller; Complete takes DomainSpread's args and the profile's name from it.
	Profile *profile.Profile
	// DeletionCost turns the keeper on; Keeper tunes it.
	DeletionCost bool
	Keeper       KeeperOptions
	// Rebalance turns the rebalancer on (off by default); RebalanceOptions tune it.
	Rebalance  bool
	Rebalancer RebalanceOptions
	// HandoffSwitch, with Rebalance, is the hand-off controller's switch: the rebalancer evicts
	// nothing while it does not say handoff "true" (pool-scheduler degraded) or cannot be read.
	// Empty name: not read.
	HandoffSwitch types.NamespacedName
	// BudgetFloor turns on the budget floor (off by default): a PodDisruptionBudget for each
	// workload without one in the namespaces opted in (package floor).
	BudgetFloor bool
}

// LeaseName is the spread mode's default leader Lease (the chart names its own per release,
// <scheduler name>-spread: two releases in one namespace must not share it).
const LeaseName = "pool-scheduler-spread"

// Complete takes DomainSpread's dimensions and mode (and, to rebalance, SystemPoolGuard's
// system nodes) and the schedulerName whose pods are kept from o.Profile, and validates o; each
// error names the flag at fault.
func (o *Options) Complete() error {
	p := o.Profile
	if p == nil {
		return errors.New("--config: required (the scheduler's configuration file)")
	}
	if o.HandoffSwitch.Name != "" && o.HandoffSwitch.Namespace == "" {
		return errors.New("--handoff-switch-namespace: required with --handoff-switch-configmap (default: $POD_NAMESPACE)")
	}
	deletionCost := o.DeletionCost
	path, args := p.Path, p.Args
	o.Keeper.SchedulerName = p.Name()
	o.Keeper.Spread = args.DomainSpread
	o.Keeper.Off = !deletionCost
	o.Rebalancer.MaxSkew = 1
	if args.DomainSpread.Mode == config.SpreadHard {
		o.Rebalancer.MaxSkew = int(args.DomainSpread.MaxSkew)
	}
	if err := o.Keeper.Validate(); err != nil {
		return fmt.Errorf("deletion cost: %w", err)
	}
	if o.Rebalance {
		system, err := pool.NewSystemPolicy(args.SystemPoolGuard)
		if err != nil {
			return fmt.Errorf("--config %s: SystemPoolGuard: %w", path, err)
		}
		o.Rebalancer.System = &system
		o.Rebalancer.Pools = pool.NewIdentity(args.NodePoolReady.PoolLabelKeys)
		if err := o.Rebalancer.Validate(); err != nil {
			return fmt.Errorf("rebalance: %w", err)
		}
	}
	if !deletionCost && !o.Rebalance && !o.BudgetFloor {
		return errors.New("--deletion-cost=false, --rebalance=false and --budget-floor=false: nothing to do")
	}
	return nil
}

// SetupWithManager adds the leader's keeper (and rebalancer, and budget floor) to mgr, which
// cmd/pool-labeler/app builds (leader-elected, released on cancel; with the budget floor, its
// cache options from floor.CacheOptions); standbys wait on the Lease.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if o.BudgetFloor {
		if err := floor.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if o.Keeper.Off && !o.Rebalance {
		return nil // the budget floor alone: no pod informers
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	if o.Rebalance && o.HandoffSwitch.Name != "" {
		// The hand-off controller's verdict, as it publishes it: the rebalancer pauses while
		// pool-scheduler is degraded.
		w := handoff.NewSwitchWatch(cs, o.HandoffSwitch)
		if err := mgr.Add(manager.RunnableFunc(w.Run)); err != nil {
			return err
		}
		o.Rebalancer.Degraded = w.Degraded
	}
	k, err := NewKeeper(cs, mgr.GetEventRecorderFor(LeaseName), o.Keeper)
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(k.Run)); err != nil {
		return err
	}
	if o.Rebalance {
		r, err := NewRebalancer(k, o.Rebalancer)
		if err != nil {
			return err
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { r.Run(ctx); return nil })); err != nil {
			return err
		}
	}
	return nil
}
