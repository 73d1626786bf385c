// Package validation validates pool-scheduler's plugin args. Errors carry field paths, so a
// scheduler that refuses to start names the field to fix.
package validation

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

var unknownPoolPolicies = sets.New(
	string(config.UnknownPoolAuto), string(config.UnknownPoolReject), string(config.UnknownPoolAllow))

// ValidateNodePoolReadyArgs validates NodePoolReadyArgs; path is where the args sit in the configuration.
func ValidateNodePoolReadyArgs(path *field.Path, args *config.NodePoolReadyArgs) error {
	var errs field.ErrorList
	if len(args.PoolLabelKeys) == 0 {
		errs = append(errs, field.Required(path.Child("poolLabelKeys"), "at least one pool label key is needed"))
	}
	errs = append(errs, pool.ValidateLabelKeys(args.PoolLabelKeys, path.Child("poolLabelKeys"))...)
	errs = append(errs, pool.ValidateLabelKeys(args.RequiredLabelKeys, path.Child("requiredLabelKeys"))...)
	for name, keys := range args.PoolRequiredLabelKeys {
		p := path.Child("poolRequiredLabelKeys").Key(name)
		errs = append(errs, pool.ValidateName(name, p)...)
		errs = append(errs, pool.ValidateLabelKeys(keys, p)...)
	}
	if !unknownPoolPolicies.Has(string(args.UnknownPoolPolicy)) {
		errs = append(errs, field.NotSupported(path.Child("unknownPoolPolicy"), args.UnknownPoolPolicy, sets.List(unknownPoolPolicies)))
	}
	if args.LabelSetNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(args.LabelSetNamespace) {
			errs = append(errs, field.Invalid(path.Child("labelSetNamespace"), args.LabelSetNamespace, msg))
		}
	}
	return errs.ToAggregate()
}
