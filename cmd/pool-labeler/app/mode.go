package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/internal/tlsserving"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// A mode is one pool-labeler subcommand: which of the shared flags it takes, its own flags, and
// how it runs. Every mode that runs controllers or servers gets the one manager built here.
type mode struct {
	name, short string
	// config is the help of --config, the scheduler's configuration file (read once, before
	// anything else); "": the mode reads none. configRequired: it cannot run without.
	config         string
	configRequired bool
	// configAlias is the mode's earlier name of --config, still accepted (deprecated).
	configAlias string
	// schedulerName is what --scheduler-name means to the mode (its help); "": it takes none.
	// With --config it names the profile of the configuration the mode serves.
	schedulerName string
	// serve: the mode serves /metrics, /healthz and /readyz; nil: it serves nothing.
	serve *serving
	// lease is the default Lease of leader election, leaseHelp what to know about its name;
	// "": the mode is not leader-elected. releaseOnCancel: a replica that stops leading gives
	// the Lease up at once (and exits), so its successor starts from a clean state.
	lease, leaseHelp string
	releaseOnCancel  bool
	// scheme is the manager's; nil: client-go's.
	scheme *runtime.Scheme
	// flags registers the mode's own flags and returns how it runs with them and the shared
	// ones (s is filled when the command runs).
	flags func(fs *pflag.FlagSet, s *shared) runner
}

// serving tunes the shared serving flags for a mode.
type serving struct {
	// ready says when /readyz reports ready, beyond "once started".
	ready string
	// certDir and certDirHelp replace --metrics-cert-dir's default and help.
	certDir, certDirHelp string
}

// runner is how a mode runs: complete, then either setup on the manager, or run.
type runner struct {
	// complete validates the mode's flags (the configuration decoded into shared.profile) and
	// returns the "Starting" line's keys and values. It runs before anything is connected to.
	complete func(cmd *cobra.Command) ([]any, error)
	// managerOptions adjusts the manager's options (the labeler's cache, the keeper's metrics
	// certificate); nil: none.
	managerOptions func(*ctrl.Options) error
	// setup adds the mode to the manager: its package's SetupWithManager.
	setup func(ctx context.Context, mgr ctrl.Manager) error
	// run replaces the manager for modes that are none: domain (a loop on one node, no
	// servers) and handback (a Job that ends).
	run func(ctx context.Context, cfg *rest.Config) error
}

// shared holds the flags every mode takes the same way.
type shared struct {
	kubeconfig *string
	// qps and burst are the client-side rate limit of the mode's API clients (--kube-api-qps,
	// --kube-api-burst).
	qps   float32
	burst int

	config string
	// schedulerName is --scheduler-name; profile is --config decoded once, with that profile
	// picked (nil without --config).
	schedulerName string
	profile       *profile.Profile

	metricsAddr    string
	metricsSecure  bool
	metricsCertDir string
	probeAddr      string

	leaderElect                               bool
	lease, leaseNamespace                     string
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are every mode's client rate: component-base's
// ClientConnection defaults (kube-scheduler's). client-go's own (5/s, burst 10, what the binary
// had before it had these flags) held the controller to 2.5 node joins/s, each join two writes
// (docs/gate.md, "Joins at scale").
const (
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
)

// addFlags registers the shared flags m takes.
func (s *shared) addFlags(f *pflag.FlagSet, m mode) {
	// Every mode talks to the API server. kube-scheduler's and kube-controller-manager's names.
	f.Float32Var(&s.qps, "kube-api-qps", DefaultKubeAPIQPS, "requests per second to the API server at most, per API client of the mode (the manager's client makes one per kind of object, a clientset one for all its kinds); the API server's Priority and Fairness still applies; unlike kube-scheduler's, no negative value turns the limit off")
	f.IntVar(&s.burst, "kube-api-burst", DefaultKubeAPIBurst, "requests to the API server in a burst at most, per API client of the mode")
	if m.config != "" {
		f.StringVar(&s.config, "config", "", m.config)
		if m.configAlias != "" {
			f.StringVar(&s.config, m.configAlias, "", "the same as --config (its earlier name)")
			_ = f.MarkDeprecated(m.configAlias, "use --config")
		}
	}
	if m.schedulerName != "" {
		help := m.schedulerName
		if m.config != "" {
			help += ` ("": the first profile of --config)`
		}
		f.StringVar(&s.schedulerName, "scheduler-name", profile.DefaultSchedulerName, help)
	}
	if m.serve != nil {
		f.StringVar(&s.metricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables")
		f.BoolVar(&s.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the apiserver authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the non-resource URL /metrics); false: plain HTTP to anyone who can connect, so bind it to 127.0.0.1")
		certDirHelp := "directory with the metrics server's tls.crt and tls.key; empty or missing files: a self-signed certificate"
		if m.serve.certDirHelp != "" {
			certDirHelp = m.serve.certDirHelp
		}
		f.StringVar(&s.metricsCertDir, "metrics-cert-dir", m.serve.certDir, certDirHelp)
		probeHelp := "address of /healthz and /readyz; 0 disables"
		if m.serve.ready != "" {
			probeHelp = "address of /healthz and /readyz (" + m.serve.ready + "); 0 disables"
		}
		f.StringVar(&s.probeAddr, "health-probe-bind-address", ":8081", probeHelp)
	}
	if m.lease != "" {
		f.BoolVar(&s.leaderElect, "leader-elect", true, "elect a leader on the Lease --leader-elect-lease, so replicas can run side by side")
		f.StringVar(&s.lease, "leader-elect-lease", m.lease, "name of the leader Lease"+m.leaseHelp)
		f.StringVar(&s.leaseNamespace, "leader-elect-namespace", "", "namespace of the Lease; empty: the pod's namespace")
		// kube-scheduler's flag names and defaults (controller-runtime's defaults too).
		f.DurationVar(&s.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the last renewal before taking the Lease over")
		f.DurationVar(&s.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps retrying a renewal before it gives up leading (less than the lease duration)")
		f.DurationVar(&s.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	}
}

// command returns m's subcommand.
func (m mode) command(kubeconfig *string) *cobra.Command {
	s := &shared{kubeconfig: kubeconfig}
	cmd := &cobra.Command{Use: m.name, Short: m.short}
	s.addFlags(cmd.Flags(), m)
	r := m.flags(cmd.Flags(), s)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := s.complete(m); err != nil {
			return err
		}
		keys, err := r.complete(cmd)
		if err != nil {
			return err
		}
		ctx, cfg, err := start(s, m.name, keys...)
		if err != nil {
			return err
		}
		if r.run != nil {
			return r.run(ctx, cfg)
		}
		mgr, err := s.manager(cfg, m, r)
		if err != nil {
			return err
		}
		if err := r.setup(ctx, mgr); err != nil {
			return err
		}
		return mgr.Start(ctx)
	}
	return cmd
}

// complete validates the shared flags and reads and decodes the scheduler's configuration,
// once, for every mode that takes it.
func (s *shared) complete(m mode) error {
	if err := validateClientRate(s.qps, s.burst); err != nil {
		return err
	}
	if m.lease != "" {
		if err := validateLeaderElection(s.leaseDuration, s.renewDeadline, s.retryPeriod); err != nil {
			return err
		}
		if s.lease == "" { // as before the modes shared this code: empty is the default
			s.lease = m.lease
		}
	}
	switch {
	case m.config == "":
	case s.config != "":
		data, err := os.ReadFile(s.config)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if s.profile, err = profile.Load(s.config, data, s.schedulerName); err != nil {
			return err
		}
	case m.configRequired:
		return errors.New("--config: required (the scheduler's configuration file)")
	}
	return nil
}

// manager builds the mode's manager: metrics and probes, leader election, and what the mode
// adds to its options.
func (s *shared) manager(cfg *rest.Config, m mode, r runner) (ctrl.Manager, error) {
	opts := ctrl.Options{Scheme: m.scheme}
	if m.serve != nil {
		opts.Metrics = metricsOptions(s.metricsAddr, s.metricsSecure, s.metricsCertDir)
		opts.HealthProbeBindAddress = s.probeAddr
	} else {
		opts.Metrics = metricsserver.Options{BindAddress: "0"}
	}
	if m.lease != "" {
		opts.LeaderElection = s.leaderElect
		opts.LeaderElectionID = s.lease
		opts.LeaderElectionNamespace = s.leaseNamespace
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &s.leaseDuration, &s.renewDeadline, &s.retryPeriod
		opts.LeaderElectionReleaseOnCancel = m.releaseOnCancel
	}
	if r.managerOptions != nil {
		if err := r.managerOptions(&opts); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// restConfig is the API server's address and credentials (--kubeconfig, else in-cluster) with
// the client rate of --kube-api-qps and --kube-api-burst.
func (s *shared) restConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", *s.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = s.qps, s.burst
	return cfg, nil
}

// validateClientRate refuses a rate client-go would not apply as given: a rate of 0 is
// client-go's silent 5/s and a negative one turns the limit off (rest.Config); a burst of 0 is
// client-go's silent 10.
func validateClientRate(qps float32, burst int) error {
	switch {
	case !(qps > 0): // NaN too
		return fmt.Errorf("--kube-api-qps must be positive, got %v", qps)
	case burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1, got %d", burst)
	}
	return nil
}

// validateLeaderElection checks the Lease timings as client-go's leader election requires them.
func validateLeaderElection(lease, renew, retry time.Duration) error {
	switch {
	case retry <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %v", retry)
	case float64(renew) <= 1.2*float64(retry): // client-go's leaderelection.JitterFactor
		return fmt.Errorf("--leader-elect-renew-deadline (%v) must be greater than 1.2 x --leader-elect-retry-period (%v)", renew, retry)
	case lease <= renew:
		return fmt.Errorf("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", lease, renew)
	}
	return nil
}

// metricsOptions: by default /metrics is served over HTTPS, and every request is authenticated
// and authorized through the apiserver (controller-runtime's filters), as kube-scheduler's secure
// port is: the node-label and label-set names in the labeler's metrics are not for anyone who can
// reach the pod. HTTP/1.1 only (tlsserving.DisableHTTP2).
func metricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if secure {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = certDir
		opts.TLSOpts = []func(*tls.Config){tlsserving.DisableHTTP2}
	}
	return opts
}
