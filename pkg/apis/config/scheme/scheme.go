// Package scheme registers pool-scheduler's plugin args with kube-scheduler's config scheme, so
// that KubeSchedulerConfiguration files decode them (strictly) into typed args.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

var (
	// Scheme is kube-scheduler's own scheme, extended with our args.
	Scheme = kubeschedulerscheme.Scheme
	// Codecs decodes strictly: unknown or duplicate fields are errors.
	Codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)
)

func init() {
	AddToScheme(Scheme)
}

// AddToScheme registers every version of our args with scheme.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}

// Defaults of each plugin's args: the v1 defaults, converted to the internal type as the
// scheduler decodes a profile that does not configure the plugin. Each call returns a new copy.
// Tools (pkg/profile) and tests take defaults from here; none writes its own copy.

// DefaultNodePoolReadyArgs returns NodePoolReady's defaulted args.
func DefaultNodePoolReadyArgs() *config.NodePoolReadyArgs {
	return defaulted(&configv1.NodePoolReadyArgs{}, &config.NodePoolReadyArgs{})
}

// DefaultSystemPoolGuardArgs returns SystemPoolGuard's defaulted args.
func DefaultSystemPoolGuardArgs() *config.SystemPoolGuardArgs {
	return defaulted(&configv1.SystemPoolGuardArgs{}, &config.SystemPoolGuardArgs{})
}

// DefaultNodePoolAffinityArgs returns NodePoolAffinity's defaulted args.
func DefaultNodePoolAffinityArgs() *config.NodePoolAffinityArgs {
	return defaulted(&configv1.NodePoolAffinityArgs{}, &config.NodePoolAffinityArgs{})
}

// DefaultDomainSpreadArgs returns DomainSpread's defaulted args.
func DefaultDomainSpreadArgs() *config.DomainSpreadArgs {
	return defaulted(&configv1.DomainSpreadArgs{}, &config.DomainSpreadArgs{})
}

func defaulted[T runtime.Object](versioned runtime.Object, internal T) T {
	Scheme.Default(versioned)
	if err := Scheme.Convert(versioned, internal, nil); err != nil {
		// Both types are registered above; a failure is a programming error.
		panic(fmt.Sprintf("converting default %T: %v", versioned, err))
	}
	return internal
}
