package app

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/domainlabeler"
)

// domainMode is no manager: a loop on its own node, with no servers (a DaemonSet).
var domainMode = mode{
	name:  "domain",
	short: "Label this node with its Azure platform fault and update domain (DaemonSet)",
	flags: domainFlags,
}

func domainFlags(f *pflag.FlagSet, _ *shared) runner {
	o := domainlabeler.Options{}
	f.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (downward API: spec.nodeName)")
	f.StringVar(&o.Endpoint, "imds-endpoint", domainlabeler.DefaultIMDSEndpoint, "instance metadata compute document URL")
	f.StringVar(&o.UpdateDomainKey, "update-domain-key", configv1.UpdateDomainLabelKey, "label key for the platform update domain")
	f.StringVar(&o.FaultDomainKey, "fault-domain-key", configv1.FaultDomainLabelKey, "label key for the platform fault domain; empty: do not write it")
	f.DurationVar(&o.RequestTimeout, "request-timeout", 5*time.Second, "timeout of one metadata request")
	f.IntVar(&o.Attempts, "attempts", 8, "metadata attempts before giving up on transient errors: refused, unreachable, timeouts, 5xx, 429 (exponential backoff from 1s, at most 1m apart)")
	f.DurationVar(&o.Interval, "recheck-interval", 5*time.Minute, "how often the labels are checked and restored")
	f.StringVar(&o.OnNotAzure, "on-not-azure", domainlabeler.OnNotAzureExit, "what to do when the endpoint is not Azure's or never answered: exit (0), idle (stay up and probe again every --reprobe-interval, for DaemonSets), fail (exit 1). On a node whose spec.providerID says Azure, an endpoint that never answers is not 'not Azure': the node gets a "+domainlabeler.ReasonMetadataUnreachable+" event, and exit and fail exit 1, idle probes again")
	f.DurationVar(&o.Reprobe, "reprobe-interval", 10*time.Minute, "with --on-not-azure=idle, how often the endpoint is probed again (also when it is unreachable on an Azure node)")
	return runner{
		complete: func(*cobra.Command) ([]any, error) {
			return []any{"node", o.NodeName}, o.Complete()
		},
		run: func(ctx context.Context, cfg *rest.Config) error {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return o.Run(ctx, cs)
		},
	}
}
