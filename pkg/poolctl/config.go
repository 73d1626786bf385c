package poolctl

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

// DefaultConfigMap is the scheduler's ConfigMap as the chart (release namespace
// pool-scheduler, scheduler.name pool-scheduler) and manifests/scheduler (whose generator adds
// a hash suffix) install it.
const DefaultConfigMap = "pool-scheduler/pool-scheduler-config"

// configKey is the ConfigMap key holding the KubeSchedulerConfiguration.
const configKey = "config.yaml"

// configSource says where the deployed scheduler configuration is read from: a file, or the
// scheduler's ConfigMap in the cluster. Never poolctl's own defaults: a tool that judged by
// other rules than the scheduler's would report what the scheduler does not do.
type configSource struct {
	file          string
	configMap     string
	schedulerName string
}

func (s *configSource) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.file, "config", "", "the deployed KubeSchedulerConfiguration file (the "+configKey+" key of the scheduler's ConfigMap); default: read the ConfigMap from the cluster (--config-map)")
	f.StringVar(&s.configMap, "config-map", DefaultConfigMap, "NAMESPACE/NAME of the scheduler's ConfigMap (key "+configKey+"); a kustomize-generated NAME-<hash> is found too")
	f.StringVar(&s.schedulerName, "scheduler-name", "pool-scheduler", "the profile of the configuration to judge by")
}

// kustomizeSuffix is the hash configMapGenerator appends to a name.
var kustomizeSuffix = regexp.MustCompile(`^-[a-z0-9]{10}$`)

// load returns the scheduler's plugin args and a description of where they came from.
func (s *configSource) load(ctx context.Context, cs kubernetes.Interface, host string) (report.Args, string, error) {
	var data []byte
	var source string
	if s.file != "" {
		var err error
		if data, err = os.ReadFile(s.file); err != nil {
			return report.Args{}, "", fmt.Errorf("--config: %w", err)
		}
		source = "file " + s.file
	} else {
		ns, name, ok := strings.Cut(s.configMap, "/")
		if !ok || ns == "" || name == "" {
			return report.Args{}, "", fmt.Errorf("--config-map: %q is not NAMESPACE/NAME", s.configMap)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// manifests/scheduler's configMapGenerator names it NAME-<hash>; after an update
			// the old ones stay until pruned, and the newest is the one the Deployment mounts.
			list, lerr := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if lerr != nil {
				return report.Args{}, "", explain(host, lerr)
			}
			cm = nil
			for i := range list.Items {
				c := &list.Items[i]
				if rest, ok := strings.CutPrefix(c.Name, name); ok && kustomizeSuffix.MatchString(rest) &&
					(cm == nil || c.CreationTimestamp.After(cm.CreationTimestamp.Time)) {
					cm = c
				}
			}
			if cm == nil {
				return report.Args{}, "", fmt.Errorf("the scheduler's ConfigMap %s (or a kustomize-generated %s-<hash>) is not in the cluster at %s: pass --config-map NAMESPACE/NAME, or --config with the deployed configuration file", s.configMap, name, host)
			}
		} else if err != nil {
			return report.Args{}, "", explain(host, err)
		}
		d, ok := cm.Data[configKey]
		if !ok {
			return report.Args{}, "", fmt.Errorf("ConfigMap %s/%s has no %s key", cm.Namespace, cm.Name, configKey)
		}
		data, source = []byte(d), "ConfigMap "+cm.Namespace+"/"+cm.Name
	}
	args, err := report.LoadArgs(data, s.schedulerName)
	if err != nil {
		return report.Args{}, "", fmt.Errorf("%s: %w", source, err)
	}
	return args, fmt.Sprintf("%s, profile %s", source, s.schedulerName), nil
}
