package app

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
)

// newHandoffCommand returns `handoff`: the hand-off controller.
func newHandoffCommand(kubeconfig *string) *cobra.Command {
	o := handoff.Options{}
	var (
		config, metricsAddr, metricsCertDir string
		metricsSecure                       bool
	)
	cmd := &cobra.Command{
		Use: "handoff",
		Short: "Judge whether pool-scheduler runs (its leader's Lease, the API server's version), set the switch the MutatingAdmissionPolicy reads, " +
			"and hand back pods stranded while it does not run (leader-elected Deployment)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config == "" {
				return errors.New("--config: required (the scheduler's configuration file)")
			}
			lease, err := handoff.LeaseFromFile(config, handoff.ModeLeader)
			if err != nil {
				return err
			}
			o.Lease = *lease
			if err := o.Validate(); err != nil {
				return err
			}
			o.Metrics = metricsOptions(metricsAddr, metricsSecure, metricsCertDir)
			ctx, cfg, err := start(*kubeconfig, "handoff", "lease", o.Lease.Lease.String(), "schedulerName", o.SchedulerName,
				"switch", o.Switch.String(), "handback", o.Handback, "handbackAfter", o.HandbackAfter)
			if err != nil {
				return err
			}
			return handoff.Run(ctx, cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&config, "config", "", "the scheduler's KubeSchedulerConfiguration file (its ConfigMap mounted): its leaderElection names the Lease whose renewals say pool-scheduler runs")
	f.StringVar(&o.SchedulerName, "scheduler-name", "pool-scheduler", "the schedulerName whose waiting pods are watched and handed back")
	f.StringVar(&o.Switch.Name, "switch-configmap", handoff.SwitchConfigMap, "the ConfigMap the MutatingAdmissionPolicy reads as its parameter (data.handoff \"true\" or \"false\"); empty: none written (webhook installs)")
	f.StringVar(&o.Switch.Namespace, "switch-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --switch-configmap")
	f.BoolVar(&o.Handback, "handback", true, "delete pods that waited for pool-scheduler longer than --handback-after while it had no healthy leader, when a ReplicaSet, StatefulSet or ReplicationController recreates them (for the default scheduler); others are reported with an event")
	f.DurationVar(&o.HandbackAfter, "handback-after", 2*time.Minute, "how long pool-scheduler must have had no healthy leader, and a pod must have waited, before the pod is handed back")
	f.Float64Var(&o.HandbackQPS, "handback-rate", 5, "pod deletions per second at most")
	f.DurationVar(&o.Interval, "sync-interval", 5*time.Second, "how often the verdict, the switch and the waiting pods are brought up to date")
	f.DurationVar(&o.ProgressBound, "progress-bound", handoff.DefaultProgressBound, "a leader that renews its Lease but has bound or judged none of the pods handed to it for this long, while one of them waited undecided as long, is treated as down (docs/operations.md); 0: the Lease alone")
	f.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader on the Lease --leader-elect-lease, so replicas can run side by side")
	f.StringVar(&o.LeaderElectLease, "leader-elect-lease", handoff.LeaseName, "name of the leader Lease; each release in a namespace needs its own (the chart: <scheduler name>-handoff)")
	f.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", "", "namespace of the Lease; empty: the pod's namespace")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables")
	f.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the apiserver authenticates and authorizes (get on /metrics); false: plain HTTP, bind it to 127.0.0.1")
	f.StringVar(&metricsCertDir, "metrics-cert-dir", "", "directory with the metrics server's tls.crt and tls.key; empty: a self-signed certificate")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables")
	return cmd
}

// newHandbackCommand returns `handback`: the chart's pre-delete hook (poolctl handback for
// kustomize users does the hand-back part).
func newHandbackCommand(kubeconfig *string) *cobra.Command {
	o := handoff.UninstallOptions{}
	cmd := &cobra.Command{
		Use: "handback",
		Short: "Before pool-scheduler is removed: delete the admission path, then hand back every pod waiting for it that a controller recreates, " +
			"until none has appeared for --settle (Job run once, e.g. Helm's pre-delete hook)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case o.SchedulerName == "":
				return errors.New("--scheduler-name: required")
			case o.Settle < 0 || o.Timeout <= o.Settle:
				return fmt.Errorf("--settle %s and --timeout %s: want 0 <= settle < timeout", o.Settle, o.Timeout)
			case o.QPS <= 0:
				return fmt.Errorf("--rate: must be positive, got %v", o.QPS)
			}
			ctx, cfg, err := start(*kubeconfig, "handback", "schedulerName", o.SchedulerName,
				"webhookConfigurations", o.WebhookConfigurations, "policyBindings", o.PolicyBindings)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			reported, err := handoff.Uninstall(ctx, cs, dyn, o)
			logger := klog.FromContext(ctx)
			for _, r := range reported {
				logger.Info("Left waiting: delete and recreate it yourself", "pod", r.Pod, "owner", r.Owner, "why", r.Detail)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.SchedulerName, "scheduler-name", "pool-scheduler", "the schedulerName whose waiting pods are handed back")
	f.StringSliceVar(&o.WebhookConfigurations, "webhook-configuration", nil, "MutatingWebhookConfigurations to delete first (the webhook way in)")
	f.StringSliceVar(&o.PolicyBindings, "policy-binding", nil, "MutatingAdmissionPolicyBindings to delete first (the policy way in)")
	f.DurationVar(&o.Settle, "settle", 10*time.Second, "hand back until no recreatable pod has appeared for this long")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up (exit 1) after this long")
	f.Float64Var(&o.QPS, "rate", 5, "pod deletions per second at most")
	return cmd
}
