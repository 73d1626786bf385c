package pool

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultLabelKeys is the ordered list of node label keys that name a node's pool on the
// platforms pool-scheduler supports. The first key with a non-empty value wins.
var DefaultLabelKeys = []string{
	"nodepool.banzaicloud.io/name",
	"node.banzaicloud.io/nodepool",
	"kubernetes.azure.com/agentpool",
	"agentpool",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"karpenter.sh/nodepool",
	"doks.digitalocean.com/node-pool",
}

// Identity resolves a node's pool from its labels. The zero value uses DefaultLabelKeys.
// It is immutable and safe for concurrent use.
type Identity struct {
	keys []string
}

// NewIdentity returns an Identity that reads the given label keys in order. An empty list means
// DefaultLabelKeys. The keys must be valid label keys (see ValidateLabelKeys).
func NewIdentity(keys []string) Identity {
	if len(keys) == 0 {
		return Identity{}
	}
	return Identity{keys: append([]string(nil), keys...)}
}

// LabelKeys returns the ordered keys this Identity reads.
func (id Identity) LabelKeys() []string {
	if len(id.keys) == 0 {
		return DefaultLabelKeys
	}
	return id.keys
}

// PoolOf returns the node's pool: the value of the first key in the list that has a non-empty
// value. ok is false when the node carries none of them (its pool is unknown).
// It does not allocate.
func (id Identity) PoolOf(nodeLabels map[string]string) (name string, ok bool) {
	for _, k := range id.LabelKeys() {
		if v := nodeLabels[k]; v != "" {
			return v, true
		}
	}
	return "", false
}

// ValidateLabelKeys checks a configured pool label key list: keys must be valid, distinct label keys.
func ValidateLabelKeys(keys []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path.Index(i), k, msg))
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(path.Index(i), k))
		}
		seen[k] = true
	}
	return errs
}

// ValidateName checks a pool name as it appears in configuration: a valid label value, not empty.
func ValidateName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "pool name must not be empty")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(name) {
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf("not a valid pool name (pool names are node label values): %s", msg)))
	}
	return errs
}
