package profile

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
)

// Args are pool-scheduler's plugin args, decoded and defaulted as the scheduler does. Tools
// build their Policy from them, so they measure what the scheduler enforces.
type Args struct {
	NodePoolReady   *config.NodePoolReadyArgs
	SystemPoolGuard *config.SystemPoolGuardArgs
	DomainSpread    *config.DomainSpreadArgs
}

// DefaultArgs returns every plugin's v1 defaults, converted to the internal types.
func DefaultArgs() Args {
	return Args{
		NodePoolReady:   configscheme.DefaultNodePoolReadyArgs(),
		SystemPoolGuard: configscheme.DefaultSystemPoolGuardArgs(),
		DomainSpread:    configscheme.DefaultDomainSpreadArgs(),
	}
}

// ArgsFromProfile returns the args a decoded scheduler profile holds; plugins without
// pluginConfig get their defaults.
func ArgsFromProfile(p *schedconfig.KubeSchedulerProfile) (Args, error) {
	a := DefaultArgs()
	path := field.NewPath("profiles").Key(p.SchedulerName).Child("pluginConfig")
	for i, pc := range p.PluginConfig {
		var err error
		switch args := pc.Args.(type) {
		case *config.NodePoolReadyArgs:
			a.NodePoolReady, err = args, validation.ValidateNodePoolReadyArgs(path.Index(i).Child("args"), args)
		case *config.SystemPoolGuardArgs:
			a.SystemPoolGuard, err = args, validation.ValidateSystemPoolGuardArgs(path.Index(i).Child("args"), args)
		case *config.DomainSpreadArgs:
			a.DomainSpread, err = args, validation.ValidateDomainSpreadArgs(path.Index(i).Child("args"), args)
		default:
			switch pc.Name {
			case config.NodePoolReadyName, config.SystemPoolGuardName, config.DomainSpreadName:
				err = fmt.Errorf("%s: args of %s are %T, not %sArgs", path.Index(i).Child("args"), pc.Name, pc.Args, pc.Name)
			}
		}
		if err != nil {
			return Args{}, err
		}
	}
	return a, nil
}

// LoadArgs decodes a KubeSchedulerConfiguration (strictly, as the scheduler does) and returns
// the args of the profile named schedulerName ("" means the first profile).
func LoadArgs(data []byte, schedulerName string) (Args, error) {
	_, a, err := LoadProfileArgs(data, schedulerName)
	return a, err
}

// LoadConfiguration decodes a KubeSchedulerConfiguration strictly and defaults it, as
// kube-scheduler does.
func LoadConfiguration(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	obj, _, err := configscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("not a KubeSchedulerConfiguration: %T", obj)
	}
	return cfg, nil
}

// LoadProfileArgs is LoadArgs that also returns the profile's schedulerName.
func LoadProfileArgs(data []byte, schedulerName string) (string, Args, error) {
	p, err := LoadProfile(data, schedulerName)
	if err != nil {
		return "", Args{}, err
	}
	a, err := ArgsFromProfile(p)
	return p.SchedulerName, a, err
}

// LoadProfile decodes a KubeSchedulerConfiguration (strictly, defaulted, as the scheduler does)
// and returns the profile named schedulerName ("" means the first profile).
func LoadProfile(data []byte, schedulerName string) (*schedconfig.KubeSchedulerProfile, error) {
	cfg, err := LoadConfiguration(data)
	if err != nil {
		return nil, err
	}
	return profileOf(cfg, schedulerName)
}

// profileOf returns cfg's profile named schedulerName ("" means the first profile).
func profileOf(cfg *schedconfig.KubeSchedulerConfiguration, schedulerName string) (*schedconfig.KubeSchedulerProfile, error) {
	var names []string
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		if schedulerName == "" || p.SchedulerName == schedulerName {
			return p, nil
		}
		names = append(names, p.SchedulerName)
	}
	return nil, fmt.Errorf("no profile with schedulerName %q (profiles: %s)", schedulerName, strings.Join(names, ", "))
}

// Enabled reports whether the profile (defaulted: multiPoint expanded by the scheduler later,
// so both are read) enables plugin at any extension point and does not disable it.
func Enabled(p *schedconfig.KubeSchedulerProfile, plugin string) bool {
	if p.Plugins == nil {
		return false
	}
	on := false
	for _, set := range []schedconfig.PluginSet{p.Plugins.MultiPoint, p.Plugins.PreFilter, p.Plugins.Filter, p.Plugins.PreScore, p.Plugins.Score, p.Plugins.Reserve} {
		for _, e := range set.Enabled {
			on = on || e.Name == plugin
		}
	}
	for _, e := range p.Plugins.MultiPoint.Disabled {
		if e.Name == plugin || e.Name == "*" && !on {
			return false
		}
	}
	return on
}
