package spreadkeeper

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
)

// Options configure `pool-labeler spread`: the deletion-cost keeper and the rebalancer.
type Options struct {
	Keeper KeeperOptions
	// Rebalance turns the rebalancer on (off by default); RebalanceOptions tune it.
	Rebalance  bool
	Rebalancer RebalanceOptions
	// BudgetFloor turns on the budget floor (off by default): a PodDisruptionBudget for each
	// workload without one in the namespaces opted in (package floor).
	BudgetFloor bool
}

// LeaseName is the spread mode's default leader Lease (the chart names its own per release,
// <scheduler name>-spread: two releases in one namespace must not share it).
const LeaseName = "pool-scheduler-spread"

// Complete takes DomainSpread's dimensions and mode (and, to rebalance, SystemPoolGuard's
// system nodes) and the schedulerName whose pods are kept from the scheduler's configuration p
// (decoded once by the caller; nil: no --config), and validates o. deletionCost false turns the
// keeper off.
func (o *Options) Complete(p *profile.Profile, deletionCost bool) error {
	if p == nil {
		return errors.New("--config: required (the scheduler's configuration file)")
	}
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
