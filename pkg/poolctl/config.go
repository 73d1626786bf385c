package poolctl

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"errors"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// DefaultConfigMap is where the chart and manifests/scheduler install the scheduler's ConfigMap.
const DefaultConfigMap = profile.DefaultConfigMap

// configSource says where the deployed scheduler configuration is read from: a file, or the
// scheduler's ConfigMap in the cluster. Never poolctl's own defaults: a tool that judged by
// other rules than the scheduler's would report what the scheduler does not do.
type configSource struct {
	file          string
	configMap     string
	schedulerName string
}

func (s *configSource) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.file, "config", "", "the deployed KubeSchedulerConfiguration file (the "+profile.ConfigKey+" key of the scheduler's ConfigMap); default: read the ConfigMap from the cluster (--config-map)")
	f.StringVar(&s.configMap, "config-map", DefaultConfigMap, "NAMESPACE/NAME of the scheduler's ConfigMap (key "+profile.ConfigKey+"); a kustomize-generated NAME-<hash> is found too")
	f.StringVar(&s.schedulerName, "scheduler-name", "pool-scheduler", "the profile of the configuration to judge by")
}

// load returns the scheduler's plugin args and a description of where they came from.
func (s *configSource) load(ctx context.Context, cs kubernetes.Interface, host string) (profile.Args, string, error) {
	var data []byte
	var source string
	if s.file != "" {
		var err error
		if data, err = os.ReadFile(s.file); err != nil {
			return profile.Args{}, "", fmt.Errorf("--config: %w", err)
		}
		source = "file " + s.file
	} else {
		ns, name, ok := strings.Cut(s.configMap, "/")
		if !ok || ns == "" || name == "" {
			return profile.Args{}, "", fmt.Errorf("--config-map: %q is not NAMESPACE/NAME", s.configMap)
		}
		d, cm, err := profile.ReadConfigMap(ctx, cs, ns, name)
		switch {
		case errors.Is(err, profile.ErrConfigMapNotFound):
			return profile.Args{}, "", fmt.Errorf("%w at %s: pass --config-map NAMESPACE/NAME, or --config with the deployed configuration file", err, host)
		case err != nil && cm != nil:
			return profile.Args{}, "", err
		case err != nil:
			return profile.Args{}, "", explain(host, err)
		}
		data, source = d, "ConfigMap "+cm.Namespace+"/"+cm.Name
	}
	args, err := profile.LoadArgs(data, s.schedulerName)
	if err != nil {
		return profile.Args{}, "", fmt.Errorf("%s: %w", source, err)
	}
	return args, fmt.Sprintf("%s, profile %s", source, s.schedulerName), nil
}
