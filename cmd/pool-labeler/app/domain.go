package app

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/domainlabeler"
)

func newDomainCommand(kubeconfig *string) *cobra.Command {
	opts := domainlabeler.DomainOptions{}
	var (
		onNotAzure string
		interval   time.Duration
		reprobe    time.Duration
		attempts   int
	)
	cmd := &cobra.Command{
		Use:   "domain",
		Short: "Label this node with its Azure platform fault and update domain (DaemonSet)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: attempts, Cap: time.Minute}
			opts.PatchBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: time.Minute}
			var errs []error
			switch onNotAzure {
			case "exit", "fail":
			case "idle":
				// Idle, not asleep: a node whose endpoint was not up at boot is labelled once it is.
				opts.ReprobeInterval = reprobe
			default:
				errs = append(errs, fmt.Errorf("--on-not-azure: %q is not one of exit, idle, fail", onNotAzure))
			}
			if reprobe <= 0 {
				errs = append(errs, fmt.Errorf("--reprobe-interval must be positive, got %v", reprobe))
			}
			if err := errors.Join(append(errs, domainlabeler.ValidateDomainOptions(opts, interval))...); err != nil {
				return err
			}
			ctx, cfg, err := start(*kubeconfig, "domain", "node", opts.NodeName)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			logger := klog.FromContext(ctx)
			err = domainlabeler.RunDomainMode(ctx, cs, opts, interval)
			if errors.Is(err, domainlabeler.ErrMetadataUnreachable) {
				// An Azure VM whose endpoint this pod cannot reach is a failure in every mode (the
				// node is never labelled), not "not Azure"; idle returns only when ctx ended.
				if onNotAzure == "idle" && ctx.Err() != nil {
					return nil
				}
				return err
			}
			if errors.Is(err, domainlabeler.ErrNotAzure) {
				logger.Info("This node is not on Azure: no domains to label", "reason", err.Error(), "onNotAzure", onNotAzure)
				switch onNotAzure {
				case "exit":
					return nil
				case "idle":
					// Only when ctx ended: idle mode probes again every --reprobe-interval.
					return nil
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (downward API: spec.nodeName)")
	f.StringVar(&opts.Endpoint, "imds-endpoint", domainlabeler.DefaultIMDSEndpoint, "instance metadata compute document URL")
	f.StringVar(&opts.UpdateDomainKey, "update-domain-key", configv1.UpdateDomainLabelKey, "label key for the platform update domain")
	f.StringVar(&opts.FaultDomainKey, "fault-domain-key", configv1.FaultDomainLabelKey, "label key for the platform fault domain; empty: do not write it")
	f.DurationVar(&opts.RequestTimeout, "request-timeout", 5*time.Second, "timeout of one metadata request")
	f.IntVar(&attempts, "attempts", 8, "metadata attempts before giving up on transient errors: refused, unreachable, timeouts, 5xx, 429 (exponential backoff from 1s, at most 1m apart)")
	f.DurationVar(&interval, "recheck-interval", 5*time.Minute, "how often the labels are checked and restored")
	f.StringVar(&onNotAzure, "on-not-azure", "exit", "what to do when the endpoint is not Azure's or never answered: exit (0), idle (stay up and probe again every --reprobe-interval, for DaemonSets), fail (exit 1). On a node whose spec.providerID says Azure, an endpoint that never answers is not 'not Azure': the node gets a "+domainlabeler.ReasonMetadataUnreachable+" event, and exit and fail exit 1, idle probes again")
	f.DurationVar(&reprobe, "reprobe-interval", 10*time.Minute, "with --on-not-azure=idle, how often the endpoint is probed again (also when it is unreachable on an Azure node)")
	return cmd
}
