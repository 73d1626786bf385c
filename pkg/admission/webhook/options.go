package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/pool-scheduler/pool-scheduler/internal/tlsserving"
	admissionpkg "github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// Options configure `pool-labeler webhook`.
type Options struct {
	// Profile is the scheduler's configuration (--config, --scheduler-name), decoded once by
	// the caller: the webhook mutates for this profile.
	Profile *profile.Profile
	// SystemNodeAffinity adds the node affinity that keeps user pods off system nodes.
	SystemNodeAffinity bool
	// Handoff, when set, is the Lease of pool-scheduler's leader: pods are handed over only
	// while it is renewed (handoff.LeaseFromConfiguration); nil: always.
	Handoff *handoff.Lease
	// Switch, with Handoff, is the hand-off controller's switch: pods are handed over only
	// while it also says the leader schedules (the controller reads the leader's heartbeat;
	// handoff.Progress), the one verdict every way in follows. Empty name: the Lease alone.
	Switch types.NamespacedName

	// HandoffMode is --handoff: ModeLeader or ModeAlways; Complete turns it into Handoff.
	HandoffMode string

	Port    int
	CertDir string

	// Mutator is what the webhook does to pods: Complete builds it from the configuration.
	Mutator *admissionpkg.Mutator
}

// Validate names the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	if o.Profile == nil {
		errs = append(errs, errors.New("--config: required (the scheduler's configuration file)"))
	}
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port: %d is not a TCP port", o.Port))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir: required"))
	}
	if o.Switch.Name != "" && o.Switch.Namespace == "" {
		errs = append(errs, errors.New("--handoff-switch-namespace: required with --handoff-switch-configmap (default: $POD_NAMESPACE)"))
	}
	return errors.Join(errs...)
}

// Complete validates o, then builds the Mutator and the hand-off Lease from o.Profile.
func (o *Options) Complete() error {
	if err := o.Validate(); err != nil {
		return err
	}
	m, err := mutatorFromProfile(o.Profile, o.SystemNodeAffinity)
	if err != nil {
		return err
	}
	o.Mutator = m
	if o.Handoff, err = handoff.LeaseFromConfiguration(o.Profile.Config, o.HandoffMode); err != nil {
		return fmt.Errorf("--config %s: %w", o.Profile.Path, err)
	}
	return nil
}

// MutatorFromConfig builds the Mutator for profile schedulerName of the scheduler
// configuration file path, from the same defaulted args the scheduler uses.
func MutatorFromConfig(path, schedulerName string, systemNodeAffinity bool) (*admissionpkg.Mutator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	p, err := profile.Load(path, data, schedulerName)
	if err != nil {
		return nil, err
	}
	return mutatorFromProfile(p, systemNodeAffinity)
}

func mutatorFromProfile(p *profile.Profile, systemNodeAffinity bool) (*admissionpkg.Mutator, error) {
	m, err := admissionpkg.NewMutator(p.Name(), p.Args.SystemPoolGuard, systemNodeAffinity)
	if err != nil {
		return nil, fmt.Errorf("--config %s: profile %s: %w", p.Path, p.Name(), err)
	}
	// The degraded spread stands in for DomainSpread: none where the profile does not spread.
	if profile.Enabled(p.Profile, config.DomainSpreadName) {
		m.WithDegradedSpread(p.Args.DomainSpread)
	}
	return m, nil
}

// SetupWithManager adds the webhook server (o.Mutator's mutations), the version-skew check and
// the hand-off judge to mgr, which cmd/pool-labeler/app builds with labeler.Scheme; /readyz
// reports ready once the certificate is served.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	cfg, m, scheme := mgr.GetConfig(), o.Mutator, mgr.GetScheme()
	if m == nil {
		return errors.New("webhook: no Mutator (Options.Complete builds it)")
	}
	server := webhook.NewServer(webhook.Options{Port: o.Port, CertDir: o.CertDir, TLSOpts: []func(*tls.Config){tlsserving.DisableHTTP2}})
	// The hand-off stops while kube-apiserver runs a version this line does not serve: checked
	// now and every 10 minutes (a control-plane upgrade happens under a running webhook).
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	skew := &handoff.SkewCheck{Gauge: apiserverSupported}
	// Before the server starts, so no pod is judged on an unread version (ServerVersion takes
	// no context; the background one carries klog's logger).
	skew.Check(context.Background(), dc)
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
		if o.Switch.Name != "" {
			// Whether the leader schedules is the hand-off controller's verdict, read from its
			// switch: the webhook judges the Lease itself (it expires within its duration even
			// while the controller is down) and follows the controller for the rest.
			sw := handoff.NewSwitchWatch(cs, o.Switch)
			if err := mgr.Add(manager.RunnableFunc(sw.Run)); err != nil {
				return err
			}
			leader = handoff.Following(w, sw, func(wedged bool) { setGauge(leaderWedged, wedged) })
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
	return mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		if err := leaseRead(); err != nil {
			return err
		}
		return server.StartedChecker()(req)
	})
}
