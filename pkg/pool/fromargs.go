package pool

import (
	"fmt"
	"slices"

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

// NewGateWithSystemArgs is NewGate knowing SystemPoolGuard's (defaulted, validated) args too: a
// NodePoolLabelSet naming a label its systemNodeSelector reads is not obeyed (RefusedKey), since
// the labeler's admission policy refuses every write that sets it. NodePoolReady and the
// labeler build their gates here from the same profile, so they ignore the same keys.
func NewGateWithSystemArgs(args *config.NodePoolReadyArgs, system *config.SystemPoolGuardArgs) Gate {
	g := NewGate(args)
	g.SystemNodeKeys = SystemNodeKeys(system)
	return g
}

// SystemNodeKeys returns the label keys SystemPoolGuard's systemNodeSelector reads (matchLabels,
// then matchExpressions, each once), as the labeler's admission policy lists them
// (systemNodeKeys): a label set naming one would turn nodes into or out of system nodes.
func SystemNodeKeys(args *config.SystemPoolGuardArgs) []string {
	if args == nil || args.SystemNodeSelector == nil {
		return nil
	}
	sel := args.SystemNodeSelector
	var keys []string
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, e := range sel.MatchExpressions {
		if !slices.Contains(keys, e.Key) {
			keys = append(keys, e.Key)
		}
	}
	return keys
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
