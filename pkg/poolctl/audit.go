package poolctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

type auditOptions struct {
	// kubectl's connection flags (--kubeconfig, --context, --namespace, --server, --as, ...), so
	// `kubectl pool audit` takes what kubectl takes.
	cluster      *genericclioptions.ConfigFlags
	output       string
	maxFindings  int
	systemPools  []string
	timeout      time.Duration
	config       configSource
	lbSKU        string
	primaryVMSet string
	// azureCloudConfig is cloud-provider-azure's cloud config file; the flags above and
	// resourceGroup override its fields.
	azureCloudConfig string
	resourceGroup    string
	// optedInSelector and optedInNamespaces select the namespaces whose pods the admission path
	// gives to the scheduler.
	optedInSelector   string
	optedInNamespaces []string
	// maxSurge is the pools' upgrade surge, for the maintenance risks.
	maxSurge string
	startup  startupTaintFlags
}

func newAuditCommand() *cobra.Command {
	o := auditOptions{cluster: genericclioptions.NewConfigFlags(false)}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Report pods on not-ready nodes, user pods on system pools, weak spread, load-balancer pool mismatches and uneven Local traffic in a live cluster (read-only)",
		Long: "Reads the scheduler's configuration (--config, or its ConfigMap: --config-map), nodes, pods, services, endpoint " +
			"slices and NodePoolLabelSets (get and list only) and reports, with the same measurements as poolctl simulate " +
			"and the policy of that configuration. Exits 1 when the findings exceed --max-findings, for CI use. " +
			"Pods, services and endpoint slices are read from every namespace, or from --namespace's only; nodes " +
			"cluster-wide, NodePoolLabelSets from the configuration's labelSetNamespaces (and the names of those elsewhere, reported).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "table" && o.output != "json" {
				return fmt.Errorf("-o: %q is not table or json", o.output)
			}
			if err := o.startup.validate(); err != nil {
				return err
			}
			r, err := audit(cmd.Context(), o)
			if err != nil {
				return err
			}
			if o.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				writeAuditTable(cmd.OutOrStdout(), r)
			}
			if r.NumFindings() > o.maxFindings {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d findings, more than --max-findings=%d\n", r.NumFindings(), o.maxFindings)
				return errFindings
			}
			return nil
		},
	}
	f := cmd.Flags()
	o.cluster.AddFlags(f)
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	f.IntVar(&o.maxFindings, "max-findings", 0, "exit 1 when there are more findings than this")
	o.config.addFlags(f)
	f.StringSliceVar(&o.systemPools, "system-pools", nil, "override the profile's SystemPoolGuard systemPools")
	f.StringVar(&o.azureCloudConfig, "azure-cloud-config", "", "cloud-provider-azure's cloud config file (azure.json, JSON or YAML): its loadBalancerSku, vmType, primaryScaleSetName / primaryAvailabilitySetName, "+
		"resourceGroup, excludeMasterFromStandardLB, loadBalancerBackendPoolConfigurationType and multipleStandardLoadBalancerConfigurations are read (nothing else, no credentials); the flags below override them")
	f.StringVar(&o.lbSKU, "azure-load-balancer-sku", "", "Azure load balancer SKU: Standard (every node cloud-provider-azure does not exclude is a backend) or Basic (one availability set or scale set); default: the cloud config's, else Standard")
	f.StringVar(&o.primaryVMSet, "azure-primary-vmset", "", "Basic SKU: cloud-provider-azure's primaryAvailabilitySetName or primaryScaleSetName, the backend of Services without "+azurelb.AzureLoadBalancerModeAnnotation)
	f.StringVar(&o.resourceGroup, "azure-resource-group", "", "the cluster's node resource group (cloud config resourceGroup, MC_<group>_<cluster>_<region> on AKS): nodes labelled "+azurelb.AzureResourceGroupLabel+" with another group are no backends of NIC-based pools")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout for reading the cluster")
	f.StringVar(&o.optedInSelector, "opted-in-selector", profile.NamespaceLabel+"=true,"+v1.LabelMetadataName+" notin (kube-system)",
		"label selector of the namespaces the admission path opts in (the chart's default: labelled, minus kube-system; add your release namespace's exclusion if you label it); pods there that name the default scheduler are reported; empty: none")
	f.StringSliceVar(&o.optedInNamespaces, "opted-in-namespaces", nil, "namespaces opted in by name (the chart's admission.namespaces)")
	f.StringVar(&o.maxSurge, "max-surge", report.DefaultMaxSurge.String(), "the node pools' upgrade maxSurge (a count or a percentage, as in az aks nodepool update --max-surge): "+
		"an upgrade drains that many nodes of a pool at once; workloads such a batch can take below two thirds of their replicas are reported as maintenance risks (docs/maintenance.md)")
	o.startup.addFlags(f)
	return cmd
}

// auditPolicy builds the policy from the scheduler configuration the cluster runs (args, read
// from source), so the audit judges what the scheduler enforces.
func auditPolicy(o auditOptions, args profile.Args, source string) (report.Policy, error) {
	if o.systemPools != nil {
		args.SystemPoolGuard.SystemPools = o.systemPools
	}
	policy, err := report.NewPolicy(args)
	if err != nil {
		return report.Policy{}, fmt.Errorf("%s: %w", source, err)
	}
	if policy.LoadBalancer, err = o.loadBalancerModel(); err != nil {
		return report.Policy{}, err
	}
	return policy, nil
}

func audit(ctx context.Context, o auditOptions) (*report.Report, error) {
	surge := intstr.Parse(o.maxSurge)
	if v, err := intstr.GetScaledValueFromIntOrPercent(&surge, 100, true); err != nil || v < 1 {
		return nil, fmt.Errorf("--max-surge: %q is not a positive count or percentage such as 10%% or 3", o.maxSurge)
	}
	cfg, err := o.cluster.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// All namespaces unless --namespace is given: the kubeconfig context's default namespace
	// does not narrow an audit.
	namespace, explicit, err := o.cluster.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if !explicit {
		namespace = v1.NamespaceAll
	}
	cfg.Timeout = o.timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	args, source, err := o.config.load(ctx, cs, cfg.Host)
	if err != nil {
		return nil, err
	}
	policy, err := auditPolicy(o, args, source)
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	svcs, err := cs.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	in := report.Inputs{}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	for i := range svcs.Items {
		in.Services = append(in.Services, &svcs.Items[i])
	}
	for i := range slices.Items {
		in.EndpointSlices = append(in.EndpointSlices, &slices.Items[i])
	}
	in.MaxSurge = &surge
	unreadBudgets := false
	// Budgets decide which workloads a drain can hurt; credentials that may not list them get
	// the risks judged as if there were none (the table says so).
	switch pdbs, err := cs.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{}); {
	case err == nil:
		in.PodDisruptionBudgets = []*policyv1.PodDisruptionBudget{}
		for i := range pdbs.Items {
			in.PodDisruptionBudgets = append(in.PodDisruptionBudgets, &pdbs.Items[i])
		}
	case apierrors.IsForbidden(err):
		unreadBudgets = true
	default:
		return nil, explain(cfg.Host, err)
	}
	if in.NamespaceLabels, err = namespaceLabels(ctx, cs, policy.LoadBalancer); err != nil {
		return nil, explain(cfg.Host, err)
	}
	sets, unread, err := readLabelSets(ctx, dynamic.NewForConfigOrDie(cfg), args.NodePoolReady.LabelSetNamespaces)
	if err != nil {
		return nil, explain(cfg.Host, err)
	}
	in.LabelSets = policy.Gate.CompileLabelSets(sets)
	in.LabelSetNamespaces, in.UnreadLabelSets = args.NodePoolReady.LabelSetNamespaces, unread
	if o.optedInSelector != "" {
		if _, err := labels.Parse(o.optedInSelector); err != nil {
			return nil, fmt.Errorf("--opted-in-selector: %w", err)
		}
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: o.optedInSelector})
		if err != nil {
			return nil, explain(cfg.Host, err)
		}
		in.OptedIn, in.SchedulerName = map[string]bool{}, o.config.schedulerName
		for _, ns := range nss.Items {
			in.OptedIn[ns.Name] = true
		}
	}
	if len(o.optedInNamespaces) > 0 {
		if in.OptedIn == nil {
			in.OptedIn, in.SchedulerName = map[string]bool{}, o.config.schedulerName
		}
		for _, ns := range o.optedInNamespaces {
			in.OptedIn[ns] = true
		}
	}
	r := report.Compute(in, policy)
	now := time.Now()
	_, r.StartupTaintLong = report.StartupTaints(report.StartupTaintInputs{Gate: policy.Gate, Sets: in.LabelSets, Unread: unread, Nodes: in.Nodes,
		Key: o.startup.key, After: o.startup.after, Now: now, Labeler: o.startup.labelerState(ctx, cs, now)})
	if unreadBudgets {
		r.MaintenanceNote = "PodDisruptionBudgets could not be listed (forbidden): maintenance risks are judged as if there were none"
	}
	return r, nil
}

// readLabelSets reads the NodePoolLabelSets as the scheduler reads them: those of namespaces
// (its labelSetNamespaces; empty: all), and the names ("namespace/name") of those elsewhere,
// which it does not read. A cluster without the CRD has none. Credentials that may list sets
// only in the namespaces read get them, and unread says the rest could not be checked.
func readLabelSets(ctx context.Context, dyn dynamic.Interface, namespaces []string) ([]*labelsv1alpha1.NodePoolLabelSet, []string, error) {
	list, err := dyn.Resource(labelsv1alpha1.Resource).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) && len(namespaces) > 0 {
		var read []*labelsv1alpha1.NodePoolLabelSet
		for _, ns := range namespaces {
			l, err := dyn.Resource(labelsv1alpha1.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return nil, nil, nil
			}
			if err != nil {
				return nil, nil, err
			}
			read = append(read, decodeLabelSets(l.Items)...)
		}
		return read, []string{report.UnreadNotChecked}, nil
	}
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var read []*labelsv1alpha1.NodePoolLabelSet
	var unread []string
	for _, set := range decodeLabelSets(list.Items) {
		if len(namespaces) == 0 || slices.Contains(namespaces, set.Namespace) {
			read = append(read, set)
		} else {
			unread = append(unread, set.Namespace+"/"+set.Name)
		}
	}
	return read, unread, nil
}

func decodeLabelSets(items []unstructured.Unstructured) []*labelsv1alpha1.NodePoolLabelSet {
	var out []*labelsv1alpha1.NodePoolLabelSet
	for i := range items {
		set := &labelsv1alpha1.NodePoolLabelSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, set); err != nil {
			// A set that does not decode (schema bypassed) is skipped, not fatal.
			continue
		}
		out = append(out, set)
	}
	return out
}

// explain turns transport errors into a message that says what to check.
func explain(host string, err error) error {
	var netErr net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the cluster at %s refused the credentials: %w (check --kubeconfig and --context)", host, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the credentials may not read this (poolctl needs get/list on the scheduler's configmap, nodes, pods, services, endpointslices, namespaces and nodepoollabelsets): %w", err)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the cluster at %s: %w (check --kubeconfig, --context and the network)", host, err)
	}
	return fmt.Errorf("reading the cluster at %s: %w", host, err)
}

func writeAuditTable(w io.Writer, r *report.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string, findings []report.Finding) {
		fmt.Fprintf(tw, "%s: %d\n", title, len(findings))
		for _, f := range findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Object, f.Node, f.Detail)
			if f.Fix != "" {
				fmt.Fprintf(tw, "  \t\tfix: %s\n", f.Fix)
			}
		}
	}
	section("PODS ON NODES WHOSE POOL LABELS ARE NOT APPLIED", r.PodsOnNotReadyNodes)
	section("USER PODS ON SYSTEM POOLS", r.UserPodsOnSystemNodes)
	section("WORKLOADS WITH WEAK SPREAD (skew > 1, or all replicas in one domain)", r.WeakSpread)
	section("LOADBALANCER SERVICES WHOSE ENDPOINTS GET NO TRAFFIC (externalTrafficPolicy: Local)", r.LoadBalancerMismatches)
	section("LOADBALANCER SERVICES WHOSE PODS GET UNEVEN TRAFFIC (externalTrafficPolicy: Local balances per node)", r.LoadBalancerUnevenTraffic)
	section("PODS OF OPTED-IN NAMESPACES NOT GIVEN TO THE SCHEDULER", r.NotAdmitted)
	section("NODEPOOLLABELSETS THE SCHEDULER DOES NOT READ, AND POOLS LABELLED FROM THEM", r.LabelSetMismatches)
	section("NODES HELD BY THE STARTUP TAINT LONGER THAN --startup-taint-after (pool-labeler has not lifted it)", r.StartupTaintLong)
	if len(r.LoadBalancerUndetermined) > 0 {
		section("LOADBALANCER BACKEND POOLS THAT CANNOT BE TOLD (not counted)", r.LoadBalancerUndetermined)
	}
	fmt.Fprintf(tw, "TOTAL FINDINGS: %d\n", r.NumFindings())
	section("MAINTENANCE RISKS: WORKLOADS AN UPGRADE CAN TAKE BELOW TWO THIRDS OF THEIR REPLICAS, OR WHOSE BUDGETS STOP ITS DRAINS (not counted)", r.MaintenanceRisks)
	if r.MaintenanceNote != "" {
		fmt.Fprintf(tw, "  note: %s\n", r.MaintenanceNote)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nSPREAD DOMAINS PER POOL (distinct values of each DomainSpread dimension)")
	writeDomains(w, r.Domains, r.DegenerateDomains)
}
