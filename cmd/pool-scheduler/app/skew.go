package app

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// apiserverSupported is this process's series of the gauge the hand-off controller reports too.
var apiserverSupported = version.APIServerSupported.WithLabelValues()

// checkingVersion wraps plugin factories so that the first plugin built reads kube-apiserver's
// version and judges it against the line's skew: kube-scheduler builds its profiles once per
// process and exits when it loses its Lease, so that is at every start and every leader term.
// Outside the skew the scheduler still runs (pods already handed to it are scheduled) and says
// so: an error naming the line to run, and pool_scheduler_apiserver_supported 0 (as the hand-off
// controller reports it). The
// hand-off stops on the judges' own check (the webhook and the hand-off controller, same line).
func checkingVersion(r frameworkruntime.Registry) frameworkruntime.Registry {
	var once sync.Once
	out := frameworkruntime.Registry{}
	for name, f := range r {
		out[name] = func(ctx context.Context, args runtime.Object, h framework.Handle) (framework.Plugin, error) {
			once.Do(func() { checkVersion(ctx, h.ClientSet().Discovery()) })
			return f(ctx, args, h)
		}
	}
	return out
}

func checkVersion(ctx context.Context, d discovery.ServerVersionInterface) {
	version.RegisterAPIServerSupported()
	logger := klog.FromContext(ctx)
	v, err := d.ServerVersion()
	if err != nil {
		logger.Error(err, "Cannot read kube-apiserver's version to check this release line's skew")
		return
	}
	if err := version.ServesServer(v.Major, v.Minor); err != nil {
		apiserverSupported.Set(0)
		logger.Error(err, "pool-scheduler's release line does not serve this kube-apiserver: the hand-off stops (new pods keep the default scheduler) until the matching line runs", "line", version.KubernetesLine(), "server", v.GitVersion)
		return
	}
	apiserverSupported.Set(1)
}
