package poolctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

// defaultLabelerLease is pool-labeler's controller's leader Lease as shipped (the release
// namespace, cmd/pool-labeler's --leader-elect-lease default).
const defaultLabelerLease = "pool-scheduler/pool-labeler"

// labelerLeaseDuration is the lease duration assumed when the Lease does not say
// (pool-labeler's --leader-elect-lease-duration default).
const labelerLeaseDuration = 15 * time.Second

// startupTaintFlags are status's and audit's view of the startup taint (docs/gate.md).
type startupTaintFlags struct {
	key   string
	after time.Duration
	lease string
}

func (s *startupTaintFlags) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.key, "startup-taint-key", pool.StartupTaintKey, "the startup taint pool-labeler lifts (its --startup-taint-key)")
	f.DurationVar(&s.after, "startup-taint-after", report.DefaultStartupTaintAfter, "report nodes that have carried the startup taint longer than this, and why")
	f.StringVar(&s.lease, "labeler-lease", defaultLabelerLease, "NAMESPACE/NAME of pool-labeler's controller's leader Lease: whether it runs explains a taint left on a node")
}

func (s *startupTaintFlags) validate() error {
	if s.after <= 0 {
		return fmt.Errorf("--startup-taint-after must be positive, got %s", s.after)
	}
	if s.key == "" {
		return fmt.Errorf("--startup-taint-key must not be empty")
	}
	if ns, name, ok := strings.Cut(s.lease, "/"); !ok || ns == "" || name == "" {
		return fmt.Errorf("--labeler-lease: %q is not NAMESPACE/NAME", s.lease)
	}
	return nil
}

// labelerState judges pool-labeler's controller by its leader Lease with the hand-off's rule
// (handoff.ReadLeader). What cannot be read is said in Reason.
func (s *startupTaintFlags) labelerState(ctx context.Context, cs kubernetes.Interface, now time.Time) report.LabelerState {
	ns, name, _ := strings.Cut(s.lease, "/")
	st := report.LabelerState{Lease: s.lease}
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		st.Reason = fmt.Sprintf("no Lease %s (--labeler-lease): pool-labeler's controller has not run here", s.lease)
		return st
	case err != nil:
		st.Reason = fmt.Sprintf("cannot read the Lease %s: %v", s.lease, err)
		return st
	}
	st.Running, st.Reason = handoff.ReadLeader(lease, handoff.Lease{Lease: types.NamespacedName{Namespace: ns, Name: name}, Duration: leaseDuration(lease)}, now)
	return st
}

func leaseDuration(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return labelerLeaseDuration
}

// StartupTaintStatus is the startup taint's part of status: the pools whose nodes carry it and
// the nodes carrying it longer than After, with why.
type StartupTaintStatus struct {
	Key          string                    `json:"key"`
	AfterSeconds float64                   `json:"afterSeconds"`
	Labeler      report.LabelerState       `json:"labeler"`
	Pools        []report.StartupTaintPool `json:"pools"`
	Long         []report.Finding          `json:"long"`
}

func (s *startupTaintFlags) status(ctx context.Context, cs kubernetes.Interface, gate pool.Gate, sets *pool.LabelSets, unread []string, nodes []*v1.Node, now time.Time) StartupTaintStatus {
	st := StartupTaintStatus{Key: s.key, AfterSeconds: s.after.Seconds(), Labeler: s.labelerState(ctx, cs, now),
		Pools: []report.StartupTaintPool{}, Long: []report.Finding{}}
	pools, long := report.StartupTaints(report.StartupTaintInputs{Gate: gate, Sets: sets, Unread: unread, Nodes: nodes,
		Key: s.key, After: s.after, Now: now, Labeler: st.Labeler})
	st.Pools = append(st.Pools, pools...)
	st.Long = append(st.Long, long...)
	return st
}

// writeStartupTaint prints the startup taint's section of the status table (nothing when no
// node carries it).
func writeStartupTaint(w io.Writer, st StartupTaintStatus) {
	if len(st.Pools) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSTARTUP TAINT %s (lifted by pool-labeler once a node's labels are applied)\n", st.Key)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  POOL\tNODES\tTAINTED")
	for _, p := range st.Pools {
		fmt.Fprintf(tw, "  %s\t%d\t%d\n", poolName(p.Pool), p.Nodes, p.Tainted)
	}
	tw.Flush()
	after := time.Duration(st.AfterSeconds * float64(time.Second))
	fmt.Fprintf(w, "TAINTED LONGER THAN %s: %d\n", after, len(st.Long))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range st.Long {
		fmt.Fprintf(tw, "  %s\t%s\n  \tfix: %s\n", f.Node, f.Detail, f.Fix)
	}
	tw.Flush()
}
