package pool

import (
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

// Identity resolves a node's pool from its labels. The zero value uses configv1.DefaultPoolLabelKeys.
// It is immutable and safe for concurrent use.
type Identity struct {
	keys []string
}

// NewIdentity returns an Identity that reads the given label keys in order. An empty list means
// configv1.DefaultPoolLabelKeys. The keys must be valid label keys (validation.ValidateLabelKeys).
func NewIdentity(keys []string) Identity {
	if len(keys) == 0 {
		return Identity{}
	}
	return Identity{keys: append([]string(nil), keys...)}
}

// LabelKeys returns the ordered keys this Identity reads.
func (id Identity) LabelKeys() []string {
	if len(id.keys) == 0 {
		return configv1.DefaultPoolLabelKeys
	}
	return id.keys
}

// PoolOf returns the node's pool: the value of the first key in the list that has a non-empty
// value. ok is false when the node carries none of them (its pool is unknown). An empty value
// names no pool, so PoolOf reads on to the next key, where FirstPresentLabel would stop.
// It does not allocate.
func (id Identity) PoolOf(nodeLabels map[string]string) (name string, ok bool) {
	for _, k := range id.LabelKeys() {
		if v := nodeLabels[k]; v != "" {
			return v, true
		}
	}
	return "", false
}

// FirstPresentLabel returns the value of the first of keys that labels carry, and whether there
// is one. A present key counts even with an empty value, as a topology key does for
// PodTopologySpread (an empty value is a domain of its own); PoolOf, which skips empty values,
// is the rule for pool names. It does not allocate.
func FirstPresentLabel(keys []string, labels map[string]string) (string, bool) {
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			return v, true
		}
	}
	return "", false
}
