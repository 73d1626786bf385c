// Package validation validates pool-scheduler's plugin args. Errors carry field paths, so a
// scheduler that refuses to start names the field to fix.
package validation

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

var unknownPoolPolicies = sets.New(
	string(config.UnknownPoolAuto), string(config.UnknownPoolReject), string(config.UnknownPoolAllow))

// ValidateNodePoolReadyArgs validates NodePoolReadyArgs; path is where the args sit in the configuration.
func ValidateNodePoolReadyArgs(path *field.Path, args *config.NodePoolReadyArgs) error {
	var errs field.ErrorList
	if len(args.PoolLabelKeys) == 0 {
		errs = append(errs, field.Required(path.Child("poolLabelKeys"), "at least one pool label key is needed"))
	}
	errs = append(errs, ValidateLabelKeys(args.PoolLabelKeys, path.Child("poolLabelKeys"))...)
	errs = append(errs, ValidateLabelKeys(args.RequiredLabelKeys, path.Child("requiredLabelKeys"))...)
	for name, keys := range args.PoolRequiredLabelKeys {
		p := path.Child("poolRequiredLabelKeys").Key(name)
		errs = append(errs, ValidatePoolName(name, p)...)
		errs = append(errs, ValidateLabelKeys(keys, p)...)
	}
	if !unknownPoolPolicies.Has(string(args.UnknownPoolPolicy)) {
		errs = append(errs, field.NotSupported(path.Child("unknownPoolPolicy"), args.UnknownPoolPolicy, sets.List(unknownPoolPolicies)))
	}
	seen := sets.New[string]()
	for i, ns := range args.LabelSetNamespaces {
		p := path.Child("labelSetNamespaces").Index(i)
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p, ns, msg))
		}
		if seen.Has(ns) {
			errs = append(errs, field.Duplicate(p, ns))
		}
		seen.Insert(ns)
	}
	return errs.ToAggregate()
}

// ValidateNodePoolAffinityArgs validates NodePoolAffinityArgs; path is where the args sit in the configuration.
func ValidateNodePoolAffinityArgs(path *field.Path, args *config.NodePoolAffinityArgs) error {
	var errs field.ErrorList
	if len(args.PoolLabelKeys) == 0 {
		errs = append(errs, field.Required(path.Child("poolLabelKeys"), "at least one pool label key is needed"))
	}
	errs = append(errs, ValidateLabelKeys(args.PoolLabelKeys, path.Child("poolLabelKeys"))...)
	return errs.ToAggregate()
}

// ValidateSystemPoolGuardArgs validates SystemPoolGuardArgs; path is where the args sit in the configuration.
func ValidateSystemPoolGuardArgs(path *field.Path, args *config.SystemPoolGuardArgs) error {
	var errs field.ErrorList
	if len(args.PoolLabelKeys) == 0 {
		errs = append(errs, field.Required(path.Child("poolLabelKeys"), "at least one pool label key is needed"))
	}
	errs = append(errs, ValidateLabelKeys(args.PoolLabelKeys, path.Child("poolLabelKeys"))...)
	for i, name := range args.SystemPools {
		errs = append(errs, ValidatePoolName(name, path.Child("systemPools").Index(i))...)
	}
	if args.SystemNodeSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(args.SystemNodeSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("systemNodeSelector"), args.SystemNodeSelector, err.Error()))
		}
	}
	if len(args.SystemPools) == 0 && (args.SystemNodeSelector == nil || (len(args.SystemNodeSelector.MatchLabels) == 0 && len(args.SystemNodeSelector.MatchExpressions) == 0)) {
		errs = append(errs, field.Required(path.Child("systemPools"), "name the system nodes with systemPools, systemNodeSelector or both"))
	}
	for i, ns := range args.SystemNamespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(path.Child("systemNamespaces").Index(i), ns, msg))
		}
	}
	for i, pc := range args.SystemPriorityClasses {
		for _, msg := range validation.IsDNS1123Subdomain(pc) {
			errs = append(errs, field.Invalid(path.Child("systemPriorityClasses").Index(i), pc, msg))
		}
	}
	errs = append(errs, ValidateLabelKeys(args.SystemTolerationKeys, path.Child("systemTolerationKeys"))...)
	return errs.ToAggregate()
}

// MaxSpreadDimensions bounds DomainSpread's dimensions, which keeps its per-node domain keys
// fixed-size (no allocation per node).
const MaxSpreadDimensions = 4

var spreadModes = sets.New(string(config.SpreadSoft), string(config.SpreadHard))

// ValidateDomainSpreadArgs validates DomainSpreadArgs; path is where the args sit in the configuration.
func ValidateDomainSpreadArgs(path *field.Path, args *config.DomainSpreadArgs) error {
	var errs field.ErrorList
	dims := path.Child("dimensions")
	if len(args.Dimensions) == 0 {
		errs = append(errs, field.Required(dims, "at least one dimension is needed"))
	}
	if len(args.Dimensions) > MaxSpreadDimensions {
		errs = append(errs, field.TooMany(dims, len(args.Dimensions), MaxSpreadDimensions))
	}
	names := sets.New[string]()
	for i, d := range args.Dimensions {
		p := dims.Index(i)
		if d.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "a dimension needs a name"))
		} else {
			for _, msg := range validation.IsDNS1123Label(d.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), d.Name, msg))
			}
			if names.Has(d.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
			}
			names.Insert(d.Name)
		}
		if len(d.LabelKeys) == 0 {
			errs = append(errs, field.Required(p.Child("labelKeys"), "a dimension needs at least one label key"))
		}
		errs = append(errs, ValidateLabelKeys(d.LabelKeys, p.Child("labelKeys"))...)
		if d.Joint && i == 0 {
			errs = append(errs, field.Invalid(p.Child("joint"), d.Joint, "the first dimension has no previous dimension to be joint with"))
		}
	}
	if !spreadModes.Has(string(args.Mode)) {
		errs = append(errs, field.NotSupported(path.Child("mode"), args.Mode, sets.List(spreadModes)))
	}
	if args.MaxSkew < 1 {
		errs = append(errs, field.Invalid(path.Child("maxSkew"), args.MaxSkew, "must be at least 1"))
	}
	return errs.ToAggregate()
}

// ValidateLabelKeys checks a configured label key list: keys must be valid, distinct label keys.
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

// ValidatePoolName checks a pool name as it appears in configuration: a valid label value, not empty.
func ValidatePoolName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "pool name must not be empty")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(name) {
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf("not a valid pool name (pool names are node label values): %s", msg)))
	}
	return errs
}
