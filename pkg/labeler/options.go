package labeler

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// Options configure the controller mode (pool-labeler controller): its flags as given, and
// what Complete derives from them (Gate, Namespaces, Warning).
type Options struct {
	// Profile is the scheduler's configuration (--config, --scheduler-name), decoded once by
	// the caller; nil: no --config.
	Profile *profile.Profile
	// PoolLabelKeys applies without Profile only; PoolLabelKeysSet: given on the command line.
	PoolLabelKeys    []string
	PoolLabelKeysSet bool
	// Namespaces restricts the NodePoolLabelSets considered; empty means all namespaces. As
	// given (NamespacesSet), then completed: the configuration's labelSetNamespaces, or the
	// labeler's own namespace (see Complete). AllNamespaces asks for every namespace.
	Namespaces    []string
	NamespacesSet bool
	AllNamespaces bool

	// Gate is NodePoolReady's rule, built (pool.NewGateWithSystemArgs) from the NodePoolReady and
	// SystemPoolGuard args of the scheduler's configuration, so the status says what the
	// scheduler enforces and the controller ignores the keys it ignores. Its Identity says which
	// pool a node is in. The zero value is NodePoolReady's defaults, with no system-node keys.
	// Complete fills it.
	Gate pool.Gate
	// OverwriteConflicts applies desired labels even over values someone else set.
	OverwriteConflicts bool
	// HoldWarningAfter: a node held by the gate this long gets a Warning event (once per
	// hold); 0 sends none.
	HoldWarningAfter time.Duration
	// StartupTaintKey is the taint lifted from a node of a pool with a NodePoolLabelSet once
	// the node, as the labeler's patch leaves it, is ready by Gate's rule; in the same patch as
	// the labels (docs/gate.md). Empty: no taint is ever touched.
	StartupTaintKey string

	// Warning is what Complete found worth logging at start ("" for nothing): the
	// NodePoolLabelSets of its own namespace only, when nothing says whose.
	Warning string
}

// Complete validates o and fills Gate, Namespaces and Warning. Each error names the flag at
// fault.
func (o *Options) Complete() error {
	if errs := validation.ValidateLabelKeys(o.PoolLabelKeys, nil); len(errs) > 0 {
		return fmt.Errorf("--pool-label-keys: %v", errs.ToAggregate())
	}
	if o.HoldWarningAfter < 0 {
		return fmt.Errorf("--hold-warning-after must not be negative, got %v", o.HoldWarningAfter)
	}
	namespaces := o.Namespaces
	gate, err := o.gate(&namespaces)
	if err != nil {
		return err
	}
	var warning string
	if o.Profile == nil {
		namespaces, warning, err = namespacesWithoutConfig(o.NamespacesSet, o.AllNamespaces, namespaces, ownNamespace(os.Getenv, serviceAccountNamespaceFile))
	} else if o.AllNamespaces {
		err = errors.New("--all-namespaces: not with --config, whose labelSetNamespaces the labeler uses (empty: every namespace)")
	}
	if err != nil {
		return err
	}
	o.Gate, o.Namespaces, o.Warning = gate, namespaces, warning
	return nil
}

// CacheOptions are the manager's cache for o: every object resynced each resync period, and
// only the NodePoolLabelSets of o.Namespaces (empty: every namespace) read.
func CacheOptions(o Options, resync time.Duration) cache.Options {
	opts := cache.Options{SyncPeriod: &resync}
	if len(o.Namespaces) > 0 {
		byNS := map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			byNS[ns] = cache.Config{}
		}
		opts.ByObject = map[client.Object]cache.ByObject{&labelsv1alpha1.NodePoolLabelSet{}: {Namespaces: byNS}}
	}
	return opts
}

// gate returns NodePoolReady's rule for the status: from the scheduler's configuration when
// given (the same defaulted, validated args the scheduler runs with), else the plugin's
// defaults with --pool-label-keys. With the configuration, the NodePoolLabelSet namespace is
// its labelSetNamespace, so the labeler and the scheduler see the same sets; an explicit
// --namespaces or --pool-label-keys that disagrees is refused rather than silently overridden.
func (o *Options) gate(namespaces *[]string) (pool.Gate, error) {
	if o.Profile == nil {
		defaults := profile.DefaultArgs()
		args := defaults.NodePoolReady
		args.PoolLabelKeys = o.PoolLabelKeys
		return pool.NewGateWithSystemArgs(args, defaults.SystemPoolGuard), nil
	}
	if o.PoolLabelKeysSet {
		return pool.Gate{}, errors.New("--pool-label-keys: not with --config, whose NodePoolReady poolLabelKeys the labeler uses")
	}
	gate, ns := GateFromProfile(o.Profile.Args)
	switch {
	case !o.NamespacesSet:
		*namespaces = ns
	case !sameNamespaces(*namespaces, ns):
		return pool.Gate{}, fmt.Errorf("--namespaces=%s disagrees with the scheduler's labelSetNamespaces %q in %s: the labeler and the scheduler must read the same NodePoolLabelSets; drop --namespaces", strings.Join(*namespaces, ","), ns, o.Profile.Path)
	}
	return gate, nil
}

// serviceAccountNamespaceFile is where a pod's ServiceAccount token volume puts its namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the labeler's namespace: $POD_NAMESPACE (the Deployments set it from the
// downward API), else the ServiceAccount token volume's namespace file; "" outside a pod.
func ownNamespace(getenv func(string) string, saFile string) string {
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(saFile); err == nil {
		return strings.TrimSpace(string(data))
	}
	return ""
}

// namespacesWithoutConfig returns the namespaces whose NodePoolLabelSets the controller applies
// without --config, and a warning to log. --namespaces names them, --all-namespaces takes every
// namespace; with neither, only its own namespace (the release's, where the shipped
// configuration's labelSetNamespaces puts them): whoever may write a NodePoolLabelSet in a
// namespace the labeler reads decides node labels, so reading every namespace must be asked for.
func namespacesWithoutConfig(namespacesSet, all bool, namespaces []string, own string) ([]string, string, error) {
	switch {
	case all && namespacesSet:
		return nil, "", errors.New("--all-namespaces and --namespaces: give one")
	case all:
		return nil, "", nil
	case namespacesSet:
		if len(namespaces) == 0 {
			return nil, "", errors.New("--namespaces is empty: name the namespaces, or give --all-namespaces for every namespace")
		}
		return namespaces, "", nil
	case own == "":
		return nil, "", errors.New("no --config, --namespaces or --all-namespaces, and no namespace of its own ($POD_NAMESPACE, or " + serviceAccountNamespaceFile + "): say whose NodePoolLabelSets to apply")
	}
	return []string{own}, fmt.Sprintf("No --config or --namespaces: applying the NodePoolLabelSets of namespace %s only (its own). "+
		"Name others with --namespaces=<ns>,<ns>, every namespace with --all-namespaces, or give --config (its NodePoolReady labelSetNamespaces, as the scheduler reads them)", own), nil
}

// sameNamespaces reports whether a and b name the same namespaces, in any order.
func sameNamespaces(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
