package util

import (
	"context"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// ShippedLabelerOptions are the options pool-labeler's controller mode derives, with its flags'
// defaults, from the shipped scheduler configuration (--config): the gate's rule, the namespaces
// it reads sets from, the startup taint it lifts.
func ShippedLabelerOptions(tb testing.TB) labeler.Options {
	tb.Helper()
	data, err := os.ReadFile(ShippedConfigPath())
	if err != nil {
		tb.Fatal(err)
	}
	gate, namespaces, err := labeler.GateFromSchedulerConfig(data, "pool-scheduler")
	if err != nil {
		tb.Fatal(err)
	}
	return labeler.Options{Gate: gate, Namespaces: namespaces, StartupTaintKey: pool.StartupTaintKey}
}

// StartLabeler runs pool-labeler's controller mode in process against the control plane until
// the test ends.
func StartLabeler(t *testing.T, cp *controlplane.ControlPlane, opts labeler.Options) {
	t.Helper()
	StartLabelerAs(t, cp.Config, opts)
}

// StartLabelerAs is StartLabeler with the client config cfg (a ServiceAccount's, say: the
// labeler as installed, under its RBAC and admission policy).
func StartLabelerAs(t *testing.T, cfg *rest.Config, opts labeler.Options) {
	t.Helper()
	stop := RunLabelerAs(t, cfg, opts)
	t.Cleanup(stop)
}

// RunLabelerAs is StartLabelerAs that returns a function stopping the labeler (a labeler down
// and back, say); calling it more than once is harmless.
func RunLabelerAs(t testing.TB, cfg *rest.Config, opts labeler.Options) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 labeler.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several tests start a labeler in one process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := labeler.SetupWithManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("labeler stopped with: %v", err)
			}
		})
	}
}
