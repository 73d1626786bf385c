package util

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ShippedConfigPath is the KubeSchedulerConfiguration the manifests ship.
func ShippedConfigPath() string {
	return filepath.Join(RepoRoot(), "manifests", "scheduler", "config.yaml")
}

// LoadShippedConfigAsShipped decodes the shipped configuration (strictly, with defaults) as
// kube-scheduler does.
func LoadShippedConfigAsShipped(t *testing.T) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	tCtx := ktesting.Init(t)
	cfg, err := options.LoadConfigFromFile(tCtx.Logger(), ShippedConfigPath())
	if err != nil {
		t.Fatalf("loading %s: %v", ShippedConfigPath(), err)
	}
	return cfg
}

// LoadShippedConfig is the shipped configuration as tests run it: NodePoolReady reads the
// NodePoolLabelSets of every namespace (no labelSetNamespaces), because tests create their sets
// in namespaces of their own; the shipped file reads the release namespace's only
// (TestShippedLabelSetNamespace).
func LoadShippedConfig(t *testing.T) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	cfg := LoadShippedConfigAsShipped(t)
	for i := range cfg.Profiles {
		for _, pc := range cfg.Profiles[i].PluginConfig {
			if args, ok := pc.Args.(*config.NodePoolReadyArgs); ok {
				args.LabelSetNamespaces = nil
			}
		}
	}
	return cfg
}

// PluginArgs returns the args of plugin in the profile.
func PluginArgs(t *testing.T, profile *schedconfig.KubeSchedulerProfile, plugin string) any {
	t.Helper()
	for _, pc := range profile.PluginConfig {
		if pc.Name == plugin {
			return pc.Args
		}
	}
	t.Fatalf("profile %s has no args for %s", profile.SchedulerName, plugin)
	return nil
}

// StartScheduler runs a scheduler in process, with pool-scheduler's plugin registry, against the
// control plane, serving the given profiles. It stops with the test. It is upstream's
// InitTestSchedulerWithOptions (test/integration/util) for a testing.TB, so benchmarks run
// schedulers too.
func StartScheduler(t testing.TB, cp *controlplane.ControlPlane, profiles ...schedconfig.KubeSchedulerProfile) *scheduler.Scheduler {
	t.Helper()
	ctx, cancel := context.WithCancel(ktesting.Init(t))
	informers := scheduler.NewInformerFactory(cp.Client, 0)
	dynInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cp.Dynamic, 0, v1.NamespaceAll, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cp.Client.EventsV1()})
	sched, err := scheduler.New(ctx, cp.Client, informers, dynInformers, profile.NewRecorderFactory(broadcaster),
		scheduler.WithKubeConfig(cp.Config),
		scheduler.WithProfiles(profiles...),
		scheduler.WithFrameworkOutOfTreeRegistry(plugins.RegistryFor(func() []schedconfig.KubeSchedulerProfile { return profiles })),
	)
	if err != nil {
		cancel()
		t.Fatalf("creating the scheduler: %v", err)
	}
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(func() {
		cancel()
		broadcaster.Shutdown()
	})
	informers.Start(ctx.Done())
	dynInformers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	dynInformers.WaitForCacheSync(ctx.Done())
	go sched.Run(ctx)
	return sched
}
