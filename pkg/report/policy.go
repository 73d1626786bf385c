package report

import (
	"fmt"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// NewPolicy builds the policy the plugins with these args enforce.
func NewPolicy(a profile.Args) (Policy, error) {
	system, err := pool.NewSystemPolicy(a.SystemPoolGuard)
	if err != nil {
		return Policy{}, err
	}
	return Policy{
		Gate:       pool.NewGateWithSystemArgs(a.NodePoolReady, a.SystemPoolGuard),
		System:     system,
		Dimensions: DimensionsOf(a.DomainSpread.Dimensions),
	}, nil
}

// DefaultPolicy is the policy of the plugins' defaults.
func DefaultPolicy() Policy {
	p, err := NewPolicy(profile.DefaultArgs())
	if err != nil {
		panic(fmt.Sprintf("default policy: %v", err))
	}
	return p
}

// DimensionsOf converts DomainSpread's dimensions.
func DimensionsOf(dims []config.SpreadDimension) []Dimension {
	out := make([]Dimension, len(dims))
	for i, d := range dims {
		out[i] = Dimension{Name: d.Name, Keys: append([]string(nil), d.LabelKeys...), Joint: d.Joint}
	}
	return out
}
