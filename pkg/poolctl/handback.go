package poolctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
)

// recreatingOwners are the controllers known to create a replacement for a deleted pod (by
// group/kind) at no cost: a pending pod they control can be handed back by deleting it. Others
// are only reported: a bare pod or a custom controller's could be lost, and a Job counts a pod
// deleted before it succeeded as a failure against its backoffLimit (or its podFailurePolicy
// may fail the Job), so its pods are left to you.
var recreatingOwners = map[string]bool{
	"apps/ReplicaSet":        true,
	"apps/StatefulSet":       true,
	"/ReplicationController": true,
}

// HandbackResult is what `poolctl handback` did with one pod.
type HandbackResult struct {
	Pod    string `json:"pod"`
	Owner  string `json:"owner,omitempty"`
	Action string `json:"action"` // handed back, would hand back, reported, skipped
	Detail string `json:"detail"`
}

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
			results, err := Handback(cmd.Context(), cs, ns, o.schedulerName, o.dryRun, flowcontrol.NewTokenBucketRateLimiter(float32(o.qps), 1))
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

// Handback deletes the pods of namespace ("": every namespace) that wait for schedulerName
// (not bound, not terminating) and that a recreating controller owns, at most as fast as limiter
// allows, and reports every waiting pod.
func Handback(ctx context.Context, cs kubernetes.Interface, namespace, schedulerName string, dryRun bool, limiter flowcontrol.RateLimiter) ([]HandbackResult, error) {
	selector := fields.AndSelectors(fields.OneTermEqualSelector("spec.schedulerName", schedulerName), fields.OneTermEqualSelector("spec.nodeName", ""))
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	var out []HandbackResult
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Spec.NodeName != "" || p.Status.Phase != v1.PodPending {
			continue
		}
		r := HandbackResult{Pod: p.Namespace + "/" + p.Name}
		ref := metav1.GetControllerOf(p)
		if ref != nil {
			r.Owner = ref.Kind + " " + ref.Name
		}
		switch {
		case ref == nil:
			r.Action, r.Detail = "reported", "a bare pod: no controller recreates it; delete and recreate it yourself"
		case groupOf(ref.APIVersion) == "batch" && ref.Kind == "Job":
			r.Action, r.Detail = "reported", "a Job's pod: deleting it counts as a failure against the Job's backoffLimit; recreate it by hand if the Job allows"
		case !recreatingOwners[groupOf(ref.APIVersion)+"/"+ref.Kind]:
			r.Action, r.Detail = "reported", fmt.Sprintf("its controller (%s) is not known to recreate deleted pods", ref.APIVersion)
		case dryRun:
			r.Action, r.Detail = "would hand back", "its controller recreates it"
		default:
			if err := limiter.Wait(ctx); err != nil {
				return out, err
			}
			uid, rv := p.UID, p.ResourceVersion
			err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
			switch {
			case err == nil:
				r.Action, r.Detail = "handed back", "deleted; its controller recreates it"
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				r.Action, r.Detail = "skipped", "changed since it was listed (bound, or gone): left alone"
			default:
				return out, err
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}

// groupOf returns the API group of an apiVersion ("" for the core group's "v1").
func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}

func writeHandbackTable(w io.Writer, results []HandbackResult) {
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
