package certkeeper

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure `pool-labeler certs`.
type Options struct {
	Sets     []Set
	Interval time.Duration
	// Metrics: the keeper's own /metrics server. With a set's CertDir as its CertDir it serves
	// that set's certificate, written before the server starts.
	Metrics   metricsserver.Options
	ProbeAddr string
}

// Run keeps the sets until ctx ends. The first pass is made before the metrics server starts
// (it may serve a certificate of a set), retried every 10 seconds until it succeeds.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	k, err := NewKeeper(cs, o.Interval, o.Sets...)
	if err != nil {
		return err
	}
	for _, s := range o.Sets {
		if s.CertDir != "" {
			if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
		}
	}
	logger := klog.FromContext(ctx)
	for err := k.Sync(ctx); err != nil; err = k.Sync(ctx) {
		logger.Error(err, "Keeping certificates; retrying in 10s")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: o.Metrics, HealthProbeBindAddress: o.ProbeAddr})
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(k.Run)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("certificates", func(*http.Request) error { return k.Ready() }); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
