package simulate

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	shipped "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
)

// Mode is one side of the comparison: a scheduler profile.
type Mode struct {
	Name    string
	Profile schedconfig.KubeSchedulerProfile
}

// Modes returns the default kube-scheduler profile and pool-scheduler's shipped profile.
func Modes() ([]Mode, error) {
	def, err := decodeConfig([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"))
	if err != nil {
		return nil, err
	}
	pool, err := decodeConfig(shipped.Config)
	if err != nil {
		return nil, fmt.Errorf("manifests/scheduler/config.yaml: %w", err)
	}
	return []Mode{
		{Name: "default", Profile: def.Profiles[0]},
		{Name: "pool-scheduler", Profile: pool.Profiles[0]},
	}, nil
}

func decodeConfig(data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	obj, _, err := configscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok || len(cfg.Profiles) == 0 {
		return nil, fmt.Errorf("not a KubeSchedulerConfiguration with a profile: %T", obj)
	}
	return cfg, nil
}

// startScheduler runs the real scheduler in process with pool-scheduler's plugins registered,
// serving one profile, until ctx ends.
func startScheduler(ctx context.Context, cp *controlplane.ControlPlane, prof schedconfig.KubeSchedulerProfile) error {
	informers := scheduler.NewInformerFactory(cp.Client, 0)
	dynInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cp.Dynamic, 0, v1.NamespaceAll, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cp.Client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	sched, err := scheduler.New(ctx, cp.Client, informers, dynInformers, profile.NewRecorderFactory(broadcaster),
		scheduler.WithKubeConfig(cp.Config),
		scheduler.WithProfiles(prof),
		scheduler.WithFrameworkOutOfTreeRegistry(plugins.RegistryFor(func() []schedconfig.KubeSchedulerProfile { return []schedconfig.KubeSchedulerProfile{prof} })),
	)
	if err != nil {
		return fmt.Errorf("creating scheduler: %w", err)
	}
	informers.Start(ctx.Done())
	dynInformers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	dynInformers.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return fmt.Errorf("scheduler handlers: %w", err)
	}
	go sched.Run(ctx)
	return nil
}
