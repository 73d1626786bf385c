// Package plugins lists pool-scheduler's own scheduler plugins, for the binary, the simulator
// and the tests.
package plugins

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	// Also registers the plugins' args types with kube-scheduler's config scheme.
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/domainspread"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolaffinity"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/systempoolguard"
)

// Registry holds pool-scheduler's own plugins.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		nodepoolready.Name:    nodepoolready.New,
		systempoolguard.Name:  systempoolguard.New,
		domainspread.Name:     domainspread.New,
		nodepoolaffinity.Name: nodepoolaffinity.New,
	}
}

// RegistryFor is Registry for a scheduler serving profiles (got when its plugins are built, so a
// command may read them after its flags): NodePoolReady gets the SystemPoolGuard args of its own
// profile, defaulted when the profile has none, so it ignores the label-set keys that profile's
// systemNodeSelector reads, as the labeler does with the same configuration (pool.RefusedKey).
// Plugins do not import each other: the registry, above them, hands one's args to the other.
func RegistryFor(profiles func() []schedconfig.KubeSchedulerProfile) frameworkruntime.Registry {
	r := Registry()
	r[nodepoolready.Name] = func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		return nodepoolready.NewWithSystemArgs(systemArgsOf(profiles(), profileName(h)))(ctx, obj, h)
	}
	return r
}

// systemArgsOf returns the SystemPoolGuard args of the profile named name, else the defaults.
func systemArgsOf(profiles []schedconfig.KubeSchedulerProfile, name string) *config.SystemPoolGuardArgs {
	for i := range profiles {
		if profiles[i].SchedulerName != name {
			continue
		}
		for _, pc := range profiles[i].PluginConfig {
			if args, ok := pc.Args.(*config.SystemPoolGuardArgs); ok && pc.Name == systempoolguard.Name {
				return args
			}
		}
	}
	return configscheme.DefaultSystemPoolGuardArgs()
}

// profileName is the name of the profile whose framework h is ("" if it does not say).
func profileName(h framework.Handle) string {
	if p, ok := h.(interface{ ProfileName() string }); ok {
		return p.ProfileName()
	}
	return ""
}
