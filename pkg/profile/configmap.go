package profile

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NamespaceLabel opts a namespace in: the admission webhook gives its new pods to
// pool-scheduler. On a pod, the value "false" opts that pod out (the apiserver defaults an empty
// schedulerName to default-scheduler before admission, so a pod cannot opt out by its
// schedulerName).
const NamespaceLabel = "pool-scheduler.io/enabled"

// HandedOverAnnotation marks a pod that admission (the webhook or the MutatingAdmissionPolicy)
// handed to pool-scheduler, set in the same mutation as its schedulerName; its value is that
// scheduler's name. The hand-off controller and the uninstall hook hand back only pods that
// carry it: a pod whose own template names pool-scheduler would come back naming it again.
const HandedOverAnnotation = "pool-scheduler.io/handed-over"

// DefaultConfigMap is the scheduler's ConfigMap as the chart (release namespace
// pool-scheduler, scheduler.name pool-scheduler) and manifests/scheduler (whose generator adds
// a hash suffix) install it.
const DefaultConfigMap = "pool-scheduler/pool-scheduler-config"

// ConfigKey is the ConfigMap key holding the KubeSchedulerConfiguration.
const ConfigKey = "config.yaml"

// kustomizeSuffix is the hash configMapGenerator appends to a name.
var kustomizeSuffix = regexp.MustCompile(`^-[a-z0-9]{10}$`)

// ErrConfigMapNotFound is returned (wrapped) by ReadConfigMap when neither the ConfigMap nor a
// kustomize-generated NAME-<hash> exists.
var ErrConfigMapNotFound = fmt.Errorf("the scheduler's ConfigMap is not in the cluster")

// ReadConfigMap returns the configuration document of the scheduler's ConfigMap namespace/name
// and the ConfigMap it came from. manifests/scheduler's configMapGenerator names it
// NAME-<hash>: after an update the old ones stay until pruned, and the newest is the one the
// Deployment mounts, so that is the one read. API errors are returned unwrapped, for the caller
// to explain.
func ReadConfigMap(ctx context.Context, cs kubernetes.Interface, namespace, name string) ([]byte, *v1.ConfigMap, error) {
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		list, lerr := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
		if lerr != nil {
			return nil, nil, lerr
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
			return nil, nil, fmt.Errorf("%w: no %s/%s (or a kustomize-generated %s-<hash>)", ErrConfigMapNotFound, namespace, name, name)
		}
	} else if err != nil {
		return nil, nil, err
	}
	d, ok := cm.Data[ConfigKey]
	if !ok {
		return nil, cm, fmt.Errorf("ConfigMap %s/%s has no %s key", cm.Namespace, cm.Name, ConfigKey)
	}
	return []byte(d), cm, nil
}
