package app

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission/webhook"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
)

var webhookMode = mode{
	name:           "webhook",
	short:          "Serve the mutating admission webhook that gives pods of opted-in namespaces to pool-scheduler (Deployment)",
	config:         "the scheduler's KubeSchedulerConfiguration file (the mounted ConfigMap), so the webhook mutates for what the scheduler enforces",
	configRequired: true,
	schedulerName:  "the profile of --config set on pods",
	serve:          &serving{ready: "ready once the certificate is served"},
	scheme:         labeler.Scheme,
	flags:          webhookFlags,
}

func webhookFlags(f *pflag.FlagSet, s *shared) runner {
	o := webhook.Options{}
	f.StringVar(&o.HandoffMode, "handoff", handoff.ModeLeader, "when pods are given to pool-scheduler: leader (only while its leader renews the Lease of --config's leaderElection, within its leaseDuration; otherwise they keep the default scheduler, with the system-node affinity) or always")
	f.StringVar(&o.Switch.Name, "handoff-switch-configmap", "", "with --handoff=leader: the hand-off controller's switch (its --switch-configmap); pods are handed over only while it also says handoff \"true\" (the controller reads the leader's heartbeat: docs/operations.md); empty: the Lease alone")
	f.StringVar(&o.Switch.Namespace, "handoff-switch-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --handoff-switch-configmap")
	var progressBound time.Duration
	f.DurationVar(&progressBound, "progress-bound", 0, "no effect: the hand-off controller judges the leader's heartbeat (its --progress-bound), which the webhook follows through --handoff-switch-configmap")
	_ = f.MarkDeprecated("progress-bound", "it does nothing: the hand-off controller judges whether the leader schedules; give the webhook --handoff-switch-configmap")
	f.BoolVar(&o.SystemNodeAffinity, "system-node-affinity", true, "add a required node-affinity term keeping user pods off system nodes (visible to cluster-autoscaler and Karpenter)")
	f.IntVar(&o.Port, "port", 10250, "HTTPS port of the webhook (10250: open from the control plane to nodes on GKE private clusters and others that firewall other ports, as for kubelets; cert-manager uses it too)")
	f.StringVar(&o.CertDir, "cert-dir", filepath.Join(os.TempDir(), "pool-scheduler-webhook"), "directory of tls.crt and tls.key")
	// The webhook's own certificate rotation is gone: the certificate keeper (pool-labeler certs
	// --webhook-dns-name) or cert-manager fills --cert-dir. Its flags stay accepted, and do
	// nothing, so the arguments of earlier installs (--cert-rotation=false) still parse.
	var unused struct {
		rotation                      bool
		secretNamespace, secretName   string
		webhookConfiguration, dnsName string
	}
	f.BoolVar(&unused.rotation, "cert-rotation", false, "no effect: the certificate keeper (pool-labeler certs --webhook-dns-name) or cert-manager fills --cert-dir")
	f.StringVar(&unused.secretNamespace, "secret-namespace", "", "no effect (went with --cert-rotation)")
	f.StringVar(&unused.secretName, "secret-name", "", "no effect (went with --cert-rotation)")
	f.StringVar(&unused.webhookConfiguration, "webhook-configuration", "", "no effect (went with --cert-rotation)")
	f.StringVar(&unused.dnsName, "dns-name", "", "no effect (went with --cert-rotation)")
	for _, name := range []string{"cert-rotation", "secret-namespace", "secret-name", "webhook-configuration", "dns-name"} {
		_ = f.MarkDeprecated(name, "it does nothing: the certificate keeper (pool-labeler certs --webhook-dns-name) or cert-manager keeps the webhook's certificate in --cert-dir")
	}
	return runner{
		complete: func(*cobra.Command) ([]any, error) {
			o.Profile = s.profile
			if err := o.Complete(); err != nil {
				return nil, err
			}
			return []any{"schedulerName", o.Mutator.SchedulerName(), "systemNodeAffinity", o.Mutator.AvoidSystem() != nil, "handoff", o.HandoffMode, "handoffSwitch", o.Switch.String()}, nil
		},
		setup: func(_ context.Context, mgr ctrl.Manager) error { return webhook.SetupWithManager(mgr, o) },
	}
}
