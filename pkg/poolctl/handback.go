package poolctl

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
)

type handbackOptions struct {
	cluster       *genericclioptions.ConfigFlags
	schedulerName string
	dryRun        bool
	qps           float64
	output        string
	timeout       time.Duration
}

func newHandbackCommand() *cobra.Command {
	o := handbackOptions{cluster: genericclioptions.NewConfigFlags(false)}
	cmd := &cobra.Command{
		Use:   "handback",
		Short: "Hand pods waiting for pool-scheduler back to the default scheduler: delete the pending ones a ReplicaSet, StatefulSet or ReplicationController recreates (before removing pool-scheduler)",
		Long: "Lists the pods that name --scheduler-name and are not bound (pending, not terminating) and deletes those whose " +
			"controller recreates them, so the replacement goes through admission again: with the admission path removed " +
			"(or the webhook's hand-off degraded) it gets the default scheduler. Bare pods and pods of other controllers are " +
			"only reported. A pod is deleted only as it was listed (UID and resourceVersion preconditions): one bound or " +
			"changed in the meantime is never touched. Remove the admission path first (admission.mode: none, or delete " +
			"the MutatingWebhookConfiguration or the MutatingAdmissionPolicyBinding), or the replacements are handed over again.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return fmt.Errorf("-o: %q is not table or json", o.output)
			}
			if o.qps <= 0 {
				return fmt.Errorf("--rate must be positive, got %v", o.qps)
			}
			cfg, cs, err := clientFor(o.cluster, o.timeout)
			if err != nil {
				return err
			}
			ns := ""
			if o.cluster.Namespace != nil {
				ns = *o.cluster.Namespace
			}
			results, err := handoff.Handback(cmd.Context(), cs, ns, o.schedulerName, o.dryRun, flowcontrol.NewTokenBucketRateLimiter(float32(o.qps), 1))
			if err != nil {
				return explain(cfg.Host, err)
			}
			if o.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			writeHandbackTable(cmd.OutOrStdout(), results)
			return nil
		},
	}
	f := cmd.Flags()
	o.cluster.AddFlags(f)
	f.StringVar(&o.schedulerName, "scheduler-name", "pool-scheduler", "the scheduler whose waiting pods are handed back")
	f.BoolVar(&o.dryRun, "dry-run", false, "report what would be handed back, delete nothing")
	f.Float64Var(&o.qps, "rate", 5, "pod deletions per second at most")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of each request")
	return cmd
}

func writeHandbackTable(w io.Writer, results []handoff.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "POD\tOWNER\tACTION\tDETAIL\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Pod, r.Owner, r.Action, r.Detail)
	}
	tw.Flush()
	if len(results) == 0 {
		fmt.Fprintln(w, "no pod waits for the scheduler")
	}
}
