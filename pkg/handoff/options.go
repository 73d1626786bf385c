package handoff

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// Options configure the hand-off controller (`pool-labeler handoff`).
type Options struct {
	// Profile is the scheduler's configuration (--config, --scheduler-name), decoded once by
	// the caller; Complete takes the Lease and SchedulerName from it.
	Profile *profile.Profile
	// Lease is pool-scheduler's leader Lease; SchedulerName the profile pods are handed to.
	Lease         Lease
	SchedulerName string
	// Switch is the ConfigMap the MutatingAdmissionPolicy reads; empty name: none written.
	Switch types.NamespacedName
	// Handback turns the recovery of stranded pods on.
	Handback bool
	// HandbackAfter is the bound: a pod is handed back once pool-scheduler has had no healthy
	// leader for this long and the pod has waited this long.
	HandbackAfter time.Duration
	// HandbackQPS bounds deletions per second.
	HandbackQPS float64
	// Interval between syncs.
	Interval time.Duration
	// ProgressBound: a leader whose heartbeat shows no progress this long is down (Progress);
	// 0: the Lease alone.
	ProgressBound time.Duration
}

// LeaseName is the hand-off controller's default leader Lease (the chart names its own per
// release, <scheduler name>-handoff: two releases in one namespace must not share it).
const LeaseName = "pool-scheduler-handoff"

// Validate names the flag at fault.
func (o *Options) Validate() error {
	var errs []error
	if o.SchedulerName == "" {
		errs = append(errs, errors.New("--scheduler-name: required"))
	}
	if o.Switch.Name != "" && o.Switch.Namespace == "" {
		errs = append(errs, errors.New("--switch-namespace: required with --switch-configmap (default: $POD_NAMESPACE)"))
	}
	if o.Handback && o.HandbackAfter < o.Lease.Duration {
		errs = append(errs, fmt.Errorf("--handback-after: %s is shorter than the scheduler's lease duration %s (a leader change would strand nothing yet)", o.HandbackAfter, o.Lease.Duration))
	}
	if o.HandbackQPS <= 0 {
		errs = append(errs, fmt.Errorf("--handback-rate: must be positive, got %v", o.HandbackQPS))
	}
	if o.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--sync-interval: must be positive, got %s", o.Interval))
	}
	if err := ValidateProgressBound(o.ProgressBound); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SetupWithManager adds the hand-off controller to mgr, which cmd/pool-labeler/app builds
// (leader-elected on the Lease pool-scheduler-handoff, released on cancel: a replica that stops
// leading exits, and its successor starts from a clean verdict). The leader judges
// pool-scheduler's health as the webhook does, writes the switch, reports the pods that wait for
// pool-scheduler and hands back the stranded ones.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	cfg := mgr.GetConfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := New(cs, dc, mgr.GetEventRecorderFor("pool-scheduler-handoff"), o, time.Now)
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(c.Run))
}

// Complete takes the Lease whose renewals say pool-scheduler runs, and the schedulerName whose
// pods are watched, from o.Profile, and validates o.
func (o *Options) Complete() error {
	p := o.Profile
	if p == nil {
		return errors.New("--config: required (the scheduler's configuration file)")
	}
	lease, err := LeaseFromConfiguration(p.Config, ModeLeader)
	if err != nil {
		return fmt.Errorf("--config %s: %w", p.Path, err)
	}
	o.Lease, o.SchedulerName = *lease, p.Name()
	return o.Validate()
}

// UninstallOptions name the admission path to remove and how to wait.
type UninstallOptions struct {
	SchedulerName string
	// WebhookConfigurations and PolicyBindings name the admission path
	// (MutatingWebhookConfigurations, MutatingAdmissionPolicyBindings); a missing one is fine.
	WebhookConfigurations []string
	PolicyBindings        []string
	// Settle: after the path is gone, hand back until no recreatable pod waited for this long
	// (an API server's admission caches may hand a pod over for a moment after the delete).
	Settle  time.Duration
	Timeout time.Duration
	QPS     float64
}

// Complete validates o (pool-labeler handback), naming the flag at fault.
func (o *UninstallOptions) Complete() error {
	switch {
	case o.SchedulerName == "":
		return errors.New("--scheduler-name: required")
	case o.Settle < 0 || o.Timeout <= o.Settle:
		return fmt.Errorf("--settle %s and --timeout %s: want 0 <= settle < timeout", o.Settle, o.Timeout)
	case o.QPS <= 0:
		return fmt.Errorf("--rate: must be positive, got %v", o.QPS)
	}
	return nil
}
