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
	f.StringVar(&s.schedulerName, "scheduler-name", profile.DefaultSchedulerName, "the profile of the configuration to judge by")
}

// read returns the deployed configuration document and where it came from.
func (s *configSource) read(ctx context.Context, cs kubernetes.Interface, host string) ([]byte, string, error) {
	if s.file != "" {
		data, err := os.ReadFile(s.file)
		if err != nil {
			return nil, "", fmt.Errorf("--config: %w", err)
		}
		return data, "file " + s.file, nil
	}
	ns, name, ok := strings.Cut(s.configMap, "/")
	if !ok || ns == "" || name == "" {
		return nil, "", fmt.Errorf("--config-map: %q is not NAMESPACE/NAME", s.configMap)
	}
	data, cm, err := profile.ReadConfigMap(ctx, cs, ns, name)
	switch {
	case errors.Is(err, profile.ErrConfigMapNotFound):
		return nil, "", fmt.Errorf("%w at %s: pass --config-map NAMESPACE/NAME, or --config with the deployed configuration file", err, host)
	case err != nil && cm != nil:
		return nil, "", err
	case err != nil:
		return nil, "", explain(host, err)
	}
	return data, "ConfigMap " + cm.Namespace + "/" + cm.Name, nil
}

// load returns the scheduler's plugin args and a description of where they came from.
func (s *configSource) load(ctx context.Context, cs kubernetes.Interface, host string) (profile.Args, string, error) {
	data, source, err := s.read(ctx, cs, host)
	if err != nil {
		return profile.Args{}, "", err
	}
	args, err := profile.LoadArgs(data, s.schedulerName)
	if err != nil {
		return profile.Args{}, "", fmt.Errorf("%s: %w", source, err)
	}
	return args, fmt.Sprintf("%s, profile %s", source, s.schedulerName), nil
}
