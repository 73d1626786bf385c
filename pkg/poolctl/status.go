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
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

type statusOptions struct {
	cluster   *genericclioptions.ConfigFlags
	config    configSource
	output    string
	timeout   time.Duration
	showNodes int
	startup   startupTaintFlags
}

// Status is what `poolctl status` reports: per pool, the nodes NodePoolReady accepts and holds
// (by reason), judged with the deployed scheduler configuration, and the pods waiting for the
// scheduler.
type Status struct {
	// Config names the configuration the nodes are judged by.
	Config string `json:"config"`
	// LabelSetNamespaces are where the NodePoolLabelSets are read (empty: every namespace).
	LabelSetNamespaces []string     `json:"labelSetNamespaces"`
	Pools              []PoolStatus `json:"pools"`
	// LabelSetMismatches are sets the scheduler does not read and pools labelled from sets it
	// does not see (report.LabelSetFindings).
	LabelSetMismatches []report.Finding `json:"labelSetMismatches,omitempty"`
	// HeldNodes are the first held nodes (by pool, then name), at most --show-nodes.
	HeldNodes []HeldNodeStatus `json:"heldNodes"`
	// PodsWaiting counts the pending pods of the profile's schedulerName not yet bound to a node.
	PodsWaiting int `json:"podsWaiting"`
	// WaitingPods are the first of them (namespace/name), with the scheduler's last message.
	WaitingPods []WaitingPod `json:"waitingPods"`
	// Scheduler is pool-scheduler's leader and what the webhook's hand-off makes of it.
	Scheduler SchedulerStatus `json:"scheduler"`
	// Domains are each pool's distinct domains per DomainSpread dimension; DegenerateDomains
	// the dimensions with one value for a whole pool, which nothing can spread over.
	Domains           []report.PoolDomains `json:"domains"`
	DegenerateDomains []report.Finding     `json:"degenerateDomains,omitempty"`
	// StartupTaint: the pools whose nodes carry pool-labeler's startup taint, and the nodes
	// carrying it longer than --startup-taint-after, with why.
	StartupTaint StartupTaintStatus `json:"startupTaint"`
}

// SchedulerStatus is pool-scheduler's leader as the webhook's hand-off judges it
// (handoff.ReadLeader: the webhook's rule on one read) and kube-apiserver's version.
type SchedulerStatus struct {
	// Lease is the leader-election Lease of the configuration (namespace/name); "" when the
	// configuration elects no leader.
	Lease string `json:"lease,omitempty"`
	// Leader holds the Lease; LeaseAgeSeconds is the time since its last renewal.
	Leader          string   `json:"leader,omitempty"`
	LeaseAgeSeconds *float64 `json:"leaseAgeSeconds,omitempty"`
	// Healthy: the leader renewed (or released) its Lease within the lease duration, so new
	// pods are handed over (--handoff=leader); else Reason says why they keep the default
	// scheduler.
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"`
	// APIServer is kube-apiserver's version (pool-scheduler's line must serve its minor:
	// docs/compatibility.md).
	APIServer string `json:"apiServer,omitempty"`
	// Switch is the hand-off controller's switch (the MutatingAdmissionPolicy's parameter) in the
	// Lease's namespace: "true" (handed over), "false" with SwitchReason, or "" when there is none.
	Switch       string `json:"switch,omitempty"`
	SwitchReason string `json:"switchReason,omitempty"`
}

// PoolStatus is one pool ("" for nodes without a pool label).
type PoolStatus struct {
	Pool  string `json:"pool"`
	Nodes int    `json:"nodes"`
	Ready int    `json:"ready"`
	Held  int    `json:"held"`
	// HeldByReason counts held nodes by reason (the reasons of NodePoolLabelSet status).
	HeldByReason map[string]int `json:"heldByReason,omitempty"`
}

// HeldNodeStatus is a held node and why.
type HeldNodeStatus struct {
	Node   string `json:"node"`
	Pool   string `json:"pool"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// WaitingPod is a pod the scheduler has not bound yet.
type WaitingPod struct {
	Pod     string `json:"pod"`
	Message string `json:"message,omitempty"`
}

func newStatusCommand() *cobra.Command {
	o := statusOptions{cluster: genericclioptions.NewConfigFlags(false)}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Per pool: nodes NodePoolReady accepts and holds (and why), and pods waiting, judged by the deployed scheduler configuration (read-only)",
		Long: "Reads the scheduler's configuration (--config, or its ConfigMap in the cluster: --config-map), nodes, " +
			"NodePoolLabelSets (of the configuration's labelSetNamespaces; the names of those elsewhere are reported) and pending pods (get and list only), and judges " +
			"every node with NodePoolReady's rule and args, as the scheduler does.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return fmt.Errorf("-o: %q is not table or json", o.output)
			}
			if o.showNodes < 0 {
				return fmt.Errorf("--show-nodes must not be negative, got %d", o.showNodes)
			}
			if err := o.startup.validate(); err != nil {
				return err
			}
			s, err := status(cmd.Context(), o)
			if err != nil {
				return err
			}
			if o.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			writeStatusTable(cmd.OutOrStdout(), s)
			return nil
		},
	}
	f := cmd.Flags()
	o.cluster.AddFlags(f)
	o.config.addFlags(f)
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.IntVar(&o.showNodes, "show-nodes", 20, "list at most this many held nodes and waiting pods")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout for reading the cluster")
	o.startup.addFlags(f)
	return cmd
}

func status(ctx context.Context, o statusOptions) (*Status, error) {
	cfg, cs, err := clientFor(o.cluster, o.timeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	data, source, err := o.config.read(ctx, cs, cfg.Host)
	if err != nil {
		return nil, err
	}
	p, err := profile.Decode(data, o.config.schedulerName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	source = fmt.Sprintf("%s, profile %s", source, o.config.schedulerName)
	args, schedCfg := p.Args, p.Config
	gate := pool.NewGateWithSystemArgs(args.NodePoolReady, args.SystemPoolGuard)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	sets, unread, err := readLabelSets(ctx, dynamic.NewForConfigOrDie(cfg), args.NodePoolReady.LabelSetNamespaces)
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	// Pending pods of every namespace, or of --namespace's only.
	namespace, explicit, err := o.cluster.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if !explicit {
		namespace = v1.NamespaceAll
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending,spec.nodeName="})
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	compiled := gate.CompileLabelSets(sets)
	s := judge(gate, compiled, nodes.Items, pods.Items, o.config.schedulerName, o.showNodes)
	s.Config, s.LabelSetNamespaces = source, args.NodePoolReady.LabelSetNamespaces
	nodePtrs := make([]*v1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	s.LabelSetMismatches = report.LabelSetFindings(gate.Identity, s.LabelSetNamespaces, unread, compiled, nodePtrs)
	s.Domains = report.PoolDomainsOf(gate.Identity, report.DimensionsOf(args.DomainSpread.Dimensions), nodePtrs)
	s.DegenerateDomains = report.DegenerateDomains(s.Domains)
	now := time.Now()
	s.Scheduler = schedulerStatus(ctx, cs, schedCfg, now)
	s.StartupTaint = o.startup.status(ctx, cs, gate, compiled, unread, nodePtrs, now)
	return s, nil
}

// schedulerStatus reads the leader's Lease and kube-apiserver's version. What it cannot read
// is said in Reason, never an error: the rest of the status stands without it.
func schedulerStatus(ctx context.Context, cs kubernetes.Interface, cfg *schedconfig.KubeSchedulerConfiguration, now time.Time) SchedulerStatus {
	var st SchedulerStatus
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		st.APIServer = v.GitVersion
	}
	key, d, ok := handoff.LeaderLease(cfg)
	if !ok {
		st.Reason = "the configuration elects no leader: no Lease tells whether pool-scheduler runs (the webhook needs --handoff=always)"
		return st
	}
	st.Lease = key.String()
	if cm, err := cs.CoreV1().ConfigMaps(key.Namespace).Get(ctx, handoff.SwitchConfigMap, metav1.GetOptions{}); err == nil {
		st.Switch, st.SwitchReason = cm.Data[handoff.SwitchKey], cm.Data[handoff.SwitchReasonKey]
		if st.Switch == "true" {
			st.SwitchReason = ""
		}
	}
	lease, err := cs.CoordinationV1().Leases(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		st.Reason = "cannot read the Lease " + key.String() + ": " + err.Error()
		return st
	}
	if lease != nil {
		if h := lease.Spec.HolderIdentity; h != nil {
			st.Leader = *h
		}
		if r := lease.Spec.RenewTime; r != nil {
			age := now.Sub(r.Time).Seconds()
			st.LeaseAgeSeconds = &age
		}
	}
	st.Healthy, st.Reason = handoff.ReadLeader(lease, handoff.Lease{Lease: key, Duration: d}, now)
	return st
}

// judge applies the gate to every node, as the scheduler does (with the pools a labeler labelled
// from sets not in view), and collects the pods waiting for schedulerName.
func judge(gate pool.Gate, sets *pool.LabelSets, nodes []v1.Node, pods []v1.Pod, schedulerName string, show int) *Status {
	s := &Status{Pools: []PoolStatus{}, HeldNodes: []HeldNodeStatus{}, WaitingPods: []WaitingPod{}}
	sets = sets.WithLabelledPools(pool.LabelledPools(gate.Identity, nodes, func(n v1.Node) (map[string]string, map[string]string) { return n.Labels, n.Annotations }))
	byPool := map[string]*PoolStatus{}
	var held []HeldNodeStatus
	for i := range nodes {
		n := &nodes[i]
		name, _ := gate.Identity.PoolOf(n.Labels)
		p := byPool[name]
		if p == nil {
			p = &PoolStatus{Pool: name, HeldByReason: map[string]int{}}
			byPool[name] = p
		}
		p.Nodes++
		v := gate.Check(n.Labels, n.Annotations, sets)
		if v.Ready() {
			p.Ready++
			continue
		}
		p.Held++
		p.HeldByReason[string(v.HeldReason())]++
		held = append(held, HeldNodeStatus{Node: n.Name, Pool: name, Reason: string(v.HeldReason()), Detail: v.Detail()})
	}
	for _, p := range byPool {
		if len(p.HeldByReason) == 0 {
			p.HeldByReason = nil
		}
		s.Pools = append(s.Pools, *p)
	}
	sort.Slice(s.Pools, func(i, j int) bool { return s.Pools[i].Pool < s.Pools[j].Pool })
	sort.Slice(held, func(i, j int) bool {
		if held[i].Pool != held[j].Pool {
			return held[i].Pool < held[j].Pool
		}
		return held[i].Node < held[j].Node
	})
	s.HeldNodes = append(s.HeldNodes, held[:min(show, len(held))]...)

	sort.Slice(pods, func(i, j int) bool {
		return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
	})
	for i := range pods {
		p := &pods[i]
		if p.Spec.SchedulerName != schedulerName || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		s.PodsWaiting++
		if len(s.WaitingPods) < show {
			w := WaitingPod{Pod: p.Namespace + "/" + p.Name}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					w.Message = c.Message
				}
			}
			s.WaitingPods = append(s.WaitingPods, w)
		}
	}
	return s
}

func writeStatusTable(w io.Writer, s *Status) {
	ns := strings.Join(s.LabelSetNamespaces, ", ")
	if ns == "" {
		ns = "every namespace"
	}
	fmt.Fprintf(w, "Judged by %s; NodePoolLabelSets of %s.\n", s.Config, ns)
	writeSchedulerLine(w, s.Scheduler)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tNODES\tREADY\tHELD\tHELD BY REASON")
	for _, p := range s.Pools {
		var reasons []string
		for r, n := range p.HeldByReason {
			reasons = append(reasons, fmt.Sprintf("%s=%d", r, n))
		}
		sort.Strings(reasons)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", poolName(p.Pool), p.Nodes, p.Ready, p.Held, strings.Join(reasons, " "))
	}
	tw.Flush()
	if len(s.HeldNodes) > 0 {
		fmt.Fprintln(w, "\nHELD NODES")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, h := range s.HeldNodes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", h.Node, poolName(h.Pool), h.Reason, h.Detail)
		}
		tw.Flush()
	}
	if len(s.LabelSetMismatches) > 0 {
		fmt.Fprintln(w, "\nLABEL SETS NOT READ")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, f := range s.LabelSetMismatches {
			fmt.Fprintf(tw, "  %s\t%s\n  \tfix: %s\n", f.Object, f.Detail, f.Fix)
		}
		tw.Flush()
	}
	writeStartupTaint(w, s.StartupTaint)
	fmt.Fprintln(w, "\nSPREAD DOMAINS PER POOL (distinct values of each DomainSpread dimension)")
	writeDomains(w, s.Domains, s.DegenerateDomains)
	fmt.Fprintf(w, "\nPODS WAITING: %d\n", s.PodsWaiting)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range s.WaitingPods {
		fmt.Fprintf(tw, "  %s\t%s\n", p.Pod, p.Message)
	}
	tw.Flush()
}

func poolName(p string) string {
	if p == "" {
		return "(no pool)"
	}
	return p
}

// writeSchedulerLine says whether pool-scheduler runs, as the webhook's hand-off judges it.
func writeSchedulerLine(w io.Writer, st SchedulerStatus) {
	api := st.APIServer
	if api == "" {
		api = "unknown"
	}
	defer func() {
		switch st.Switch {
		case "":
		case "true":
			fmt.Fprintf(w, "Hand-off switch (the MutatingAdmissionPolicy's): on.\n")
		default:
			fmt.Fprintf(w, "Hand-off switch (the MutatingAdmissionPolicy's): off (%s): new pods keep the default scheduler.\n", st.SwitchReason)
		}
	}()
	if !st.Healthy {
		fmt.Fprintf(w, "Scheduler: NOT RUNNING as far as the hand-off can tell (%s): new pods keep the default scheduler. kube-apiserver %s.\n", st.Reason, api)
		return
	}
	if st.Leader == "" {
		// Released by its leader (a rolling upgrade): the webhook keeps handing pods over while
		// a standby takes the Lease.
		fmt.Fprintf(w, "Scheduler: Lease %s released %.0fs ago by its clock: a standby takes it over; the webhook hands new pods over meanwhile. kube-apiserver %s.\n", st.Lease, *st.LeaseAgeSeconds, api)
		return
	}
	fmt.Fprintf(w, "Scheduler: leader %s, Lease %s renewed %.0fs ago by its clock: running; the webhook hands new pods over while kube-apiserver (%s) is in its line.\n", st.Leader, st.Lease, *st.LeaseAgeSeconds, api)
}

// clientFor builds the client of kubectl's connection flags, each request bounded by timeout.
func clientFor(cluster *genericclioptions.ConfigFlags, timeout time.Duration) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := cluster.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, cs, nil
}
