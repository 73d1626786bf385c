package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/pool-scheduler/pool-scheduler/internal/tlsserving"
	admissionpkg "github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// WebhookOptions configure `pool-labeler webhook`.
type WebhookOptions struct {
	// Config is the scheduler's configuration file: the webhook mutates for its profile.
	Config        string
	SchedulerName string
	// SystemNodeAffinity adds the node affinity that keeps user pods off system nodes.
	SystemNodeAffinity bool
	// Handoff, when set, is the Lease of pool-scheduler's leader: pods are handed over only
	// while it is renewed (handoff.LeaseFromConfig); nil: always.
	Handoff *handoff.Lease
	// ProgressBound, with Handoff: pods are handed over only while the leader also schedules
	// (handoff.Progress); 0: the Lease alone.
	ProgressBound time.Duration

	Port           int
	CertDir        string
	MetricsAddr    string
	MetricsSecure  bool
	MetricsCertDir string
	ProbeAddr      string
	// Metrics builds the metrics server's options (the labeler's: authenticated and authorized
	// HTTPS unless MetricsSecure is false); nil: plain HTTP on MetricsAddr.
	Metrics func(addr string, secure bool, certDir string) metricsserver.Options
}

// Validate names the flag at fault.
func (o *WebhookOptions) Validate() error {
	var errs []error
	if o.Config == "" {
		errs = append(errs, errors.New("--config: required (the scheduler's configuration file)"))
	}
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port: %d is not a TCP port", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir: required"))
	}
	if err := handoff.ValidateProgressBound(o.ProgressBound); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MutatorFromConfig builds the Mutator for profile schedulerName of the scheduler
// configuration file path, from the same defaulted args the scheduler uses.
func MutatorFromConfig(path, schedulerName string, systemNodeAffinity bool) (*admissionpkg.Mutator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	p, err := profile.LoadProfile(data, schedulerName)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	name := p.SchedulerName
	args, err := profile.ArgsFromProfile(p)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	m, err := admissionpkg.NewMutator(name, args.SystemPoolGuard, systemNodeAffinity)
	if err != nil {
		return nil, fmt.Errorf("--config %s: profile %s: %w", path, name, err)
	}
	// The degraded spread stands in for DomainSpread: none where the profile does not spread.
	if profile.Enabled(p, config.DomainSpreadName) {
		m.WithDegradedSpread(args.DomainSpread)
	}
	return m, nil
}

// RunWebhook serves the webhook until ctx ends.
func RunWebhook(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, m *admissionpkg.Mutator, o WebhookOptions) error {
	metrics := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.Metrics != nil {
		metrics = o.Metrics(o.MetricsAddr, o.MetricsSecure, o.MetricsCertDir)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metrics,
		HealthProbeBindAddress: o.ProbeAddr,
	})
	if err != nil {
		return err
	}
	server := webhook.NewServer(webhook.Options{Port: o.Port, CertDir: o.CertDir, TLSOpts: []func(*tls.Config){tlsserving.DisableHTTP2}})
	// The hand-off stops while kube-apiserver runs a version this line does not serve: checked
	// now and every 10 minutes (a control-plane upgrade happens under a running webhook).
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	skew := &handoff.SkewCheck{Gauge: apiserverSupported}
	skew.Check(ctx, dc)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		wait.UntilWithContext(ctx, func(ctx context.Context) { skew.Check(ctx, dc) }, 10*time.Minute)
		return nil
	})); err != nil {
		return err
	}
	var leader func(context.Context) (bool, string)
	// leaseRead: Ready waits for the Lease's first read, so a restarted replica does not judge
	// pods before it has seen the Lease (the old one keeps serving meanwhile), but for at most a
	// lease duration: a Lease it may not read leaves the hand-off degraded, never the webhook down.
	leaseRead := func() error { return nil }
	if o.Handoff != nil {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		w, err := handoff.NewLeaseWatch(cs, *o.Handoff, time.Now)
		if err != nil {
			return err
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { w.Run(ctx); return nil })); err != nil {
			return err
		}
		leader = w.Healthy
		if o.ProgressBound > 0 {
			// The pods handed over tell whether the leader schedules them: an informer of
			// the pending ones, not a request per admission.
			p, err := handoff.NewProgress(cs, m.SchedulerName(), o.ProgressBound, time.Now)
			if err != nil {
				return err
			}
			p.WedgedGauge = leaderWedged
			if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { p.Run(ctx); return nil })); err != nil {
				return err
			}
			leader = p.Leader(w)
		}
		started, bound := time.Now(), o.Handoff.Duration
		leaseRead = func() error {
			if w.HasSynced() || time.Since(started) > bound {
				return nil
			}
			return errors.New("the scheduler's Lease is not read yet")
		}
	}
	state := &handoff.Judge{Skew: skew, Leader: leader, Gauge: handoffMode}
	// The mode metric and log follow the verdict even while no pod is created.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		wait.UntilWithContext(ctx, func(ctx context.Context) { state.Evaluate(ctx) }, 5*time.Second)
		return nil
	})); err != nil {
		return err
	}
	serveMutations(server, m, scheme, state)

	// The certificate in CertDir is the certificate keeper's (pool-labeler certs) or
	// cert-manager's, mounted from its Secret; the server reloads it when it is renewed.
	if err := mgr.Add(manager.RunnableFunc(server.Start)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		if err := leaseRead(); err != nil {
			return err
		}
		return server.StartedChecker()(req)
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
