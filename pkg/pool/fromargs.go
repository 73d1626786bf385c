package pool

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

// NewGate builds the readiness gate NodePoolReady applies, from its (defaulted, validated) args.
// The plugin and the tools that measure a cluster build it here, so they judge nodes alike.
func NewGate(args *config.NodePoolReadyArgs) Gate {
	return Gate{
		Identity:              NewIdentity(args.PoolLabelKeys),
		UnknownPoolPolicy:     args.UnknownPoolPolicy,
		RequiredLabelKeys:     args.RequiredLabelKeys,
		PoolRequiredLabelKeys: args.PoolRequiredLabelKeys,
	}
}

// NewSystemPolicy builds the system-pool policy SystemPoolGuard applies, from its (defaulted,
// validated) args.
func NewSystemPolicy(args *config.SystemPoolGuardArgs) (SystemPolicy, error) {
	selector := labels.Nothing()
	if args.SystemNodeSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(args.SystemNodeSelector); err != nil {
			return SystemPolicy{}, fmt.Errorf("systemNodeSelector: %w", err)
		}
	}
	avoid, err := AvoidSystemNodes(args)
	if err != nil {
		return SystemPolicy{}, err
	}
	return SystemPolicy{
		Avoid:           avoid,
		Identity:        NewIdentity(args.PoolLabelKeys),
		Pools:           sets.New(args.SystemPools...),
		NodeSelector:    selector,
		Namespaces:      sets.New(args.SystemNamespaces...),
		PriorityClasses: sets.New(args.SystemPriorityClasses...),
		TolerationKeys:  sets.New(args.SystemTolerationKeys...),
		DaemonSetPods:   args.DaemonSetPodsAreSystemPods,
	}, nil
}
