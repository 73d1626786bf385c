package poolctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// Dry-run strategies, in kubectl's words (k8s.io/kubectl pkg/cmd/util GetDryRunStrategy):
// client lists and deletes nothing, none deletes. handback defaults to client.
const (
	dryRunClient = "client"
	dryRunNone   = "none"
)

type handbackOptions struct {
	cluster            *genericclioptions.ConfigFlags
	allNamespaces      bool
	schedulerName      string
	schedulerNamespace string
	dryRun             string
	force              bool
	qps                float64
	output             string
	timeout            time.Duration
}

func newHandbackOptions() *handbackOptions {
	return &handbackOptions{cluster: genericclioptions.NewConfigFlags(false)}
}

func newHandbackCommand() *cobra.Command {
	o := newHandbackOptions()
	cmd := &cobra.Command{
		Use:   "handback (-n NAMESPACE | -A) [--dry-run=client|none]",
		Short: "Hand pods waiting for pool-scheduler back to the default scheduler: list (by default) or delete (--dry-run=none) the pending ones a ReplicaSet, StatefulSet or ReplicationController recreates",
		Long: "Lists the pods of -n NAMESPACE (or every namespace: -A) that name --scheduler-name and are not bound (pending, " +
			"not terminating, not gated), and says which it would delete: those admission handed over and whose controller " +
			"recreates them, so the replacement goes through admission again and, with the admission path removed or the " +
			"hand-off off, gets the default scheduler. Bare pods and pods of other controllers are only reported.\n\n" +
			"By default (--dry-run=client) it deletes nothing. --dry-run=none deletes, only as each pod was listed (UID and " +
			"resourceVersion preconditions: one bound or changed in the meantime is never touched), and only if the admission " +
			"path would leave the replacements to the default scheduler: it reads the MutatingWebhookConfiguration and the " +
			"MutatingAdmissionPolicyBinding named --scheduler-name, the webhook's service endpoints, the policy's switch, and " +
			"in --scheduler-namespace the hand-off switch (<scheduler-name>-handoff) and the leader's Lease (<scheduler-name>), " +
			"and refuses while any of them would hand the replacements to pool-scheduler again, or cannot be read. " +
			"--force deletes anyway.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := o.validate(cmd.Flags())
			if err != nil {
				return err
			}
			cfg, cs, err := clientFor(o.cluster, o.timeout)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			refusals, notes := judgeAdmission(readAdmission(cmd.Context(), cs, dyn, namesFor(o.schedulerName, o.schedulerNamespace), time.Now()))
			act := o.dryRun == dryRunNone
			if act && len(refusals) > 0 && !o.force {
				return refusal(refusals)
			}
			results, err := handoff.Handback(cmd.Context(), cs, ns, o.schedulerName, !act, flowcontrol.NewTokenBucketRateLimiter(float32(o.qps), 1))
			if err != nil {
				return explain(cfg.Host, err)
			}
			// The admission path's verdict goes with the table, and to stderr beside JSON.
			verdict := cmd.OutOrStdout()
			if o.output == "json" {
				verdict = cmd.ErrOrStderr()
			}
			writeAdmissionVerdict(verdict, refusals, notes, act)
			if o.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			writeHandbackTable(cmd.OutOrStdout(), results)
			return nil
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

func (o *handbackOptions) addFlags(f *pflag.FlagSet) {
	o.cluster.AddFlags(f)
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "hand back the waiting pods of every namespace (or name one: -n)")
	f.StringVar(&o.schedulerName, "scheduler-name", profile.DefaultSchedulerName, "the scheduler whose waiting pods are handed back; also the name of its MutatingWebhookConfiguration, MutatingAdmissionPolicyBinding and Lease")
	f.StringVar(&o.schedulerNamespace, "scheduler-namespace", "pool-scheduler", "the namespace of the scheduler's Lease and hand-off switch")
	f.StringVar(&o.dryRun, "dry-run", dryRunClient, `"client" (the default) lists what would be handed back and deletes nothing; "none" deletes`)
	f.Lookup("dry-run").NoOptDefVal = dryRunClient
	f.BoolVar(&o.force, "force", false, "with --dry-run=none, delete even when the admission path would hand the replacements to pool-scheduler again or cannot be read")
	f.Float64Var(&o.qps, "rate", 5, "pod deletions per second at most")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of each request")
}

// validate checks the flags and returns the namespace to hand back ("": every namespace). The
// namespace must be given (-n) or every namespace asked for (-A): never the kubeconfig's.
func (o *handbackOptions) validate(f *pflag.FlagSet) (string, error) {
	ns := ""
	if o.cluster.Namespace != nil && f.Changed("namespace") {
		ns = *o.cluster.Namespace
	}
	switch {
	case ns == "" && !o.allNamespaces:
		return "", errors.New("name the namespace to hand back, --namespace/-n NAMESPACE, or --all-namespaces/-A for every namespace (the kubeconfig's namespace is not used)")
	case ns != "" && o.allNamespaces:
		return "", errors.New("--namespace/-n and --all-namespaces/-A: give one")
	case o.dryRun != dryRunClient && o.dryRun != dryRunNone:
		return "", fmt.Errorf(`--dry-run: %q is not "client" (list, the default) or "none" (delete); kubectl's "server" is not supported`, o.dryRun)
	case o.force && o.dryRun != dryRunNone:
		return "", errors.New("--force applies only with --dry-run=none: a dry run deletes nothing")
	case o.output != "table" && o.output != "json":
		return "", fmt.Errorf("-o: %q is not table or json", o.output)
	case o.qps <= 0:
		return "", fmt.Errorf("--rate must be positive, got %v", o.qps)
	}
	return ns, nil
}

// writeAdmissionVerdict says where the replacements go, and, in a dry run, whether
// --dry-run=none would be refused (or, forced, that it was).
func writeAdmissionVerdict(w io.Writer, refusals, notes []string, act bool) {
	for _, n := range notes {
		fmt.Fprintf(w, "Admission path: %s.\n", n)
	}
	for _, r := range refusals {
		switch {
		case act:
			fmt.Fprintf(w, "Forced (--force) past: %s.\n", r)
		default:
			fmt.Fprintf(w, "Would refuse --dry-run=none: %s.\n", r)
		}
	}
	if !act {
		fmt.Fprintln(w, "Dry run (--dry-run=client): nothing deleted; --dry-run=none deletes the pods marked \"would hand back\".")
	}
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
