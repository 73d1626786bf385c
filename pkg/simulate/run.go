package simulate

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	shipped "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

// Result is one scenario run under one mode.
type Result struct {
	Scenario string         `json:"scenario"`
	Mode     string         `json:"mode"`
	Report   *report.Report `json:"report"`
	Pods     int            `json:"pods"`
	Bound    int            `json:"bound"`
	// LabelToBind are the delays from a joining node's labels landing to each pod bound there.
	LabelToBindP50 time.Duration `json:"labelToBindP50"`
	LabelToBindP99 time.Duration `json:"labelToBindP99"`
	// Throughput is bound pods per second, from the first pod created to the last binding.
	Throughput float64       `json:"throughputPodsPerSecond"`
	Elapsed    time.Duration `json:"elapsed"`
	// OptedIn counts pods created without schedulerName that the admission path gave to the
	// scheduler (scenarios with optInByLabel).
	OptedIn int `json:"optedIn,omitempty"`
	// Maintenance is what a maintenance scenario's operation did.
	Maintenance *aksemu.Result `json:"maintenance,omitempty"`
}

// Options tune a run.
type Options struct {
	// Log receives the control plane's and scheduler's logs (io.Discard for quiet runs).
	Log io.Writer
	// Settle is how long nothing must change before the run ends (default 2s).
	Settle time.Duration
	// Timeout bounds the whole run (default 2m; 30m for a maintenance scenario).
	Timeout time.Duration
	// Progress, if set, receives one-line progress messages.
	Progress func(string)
	// Observe, if set, is called with the live cluster at each Stage of a maintenance
	// scenario (tests read the API there); an error ends the run.
	Observe func(context.Context, Stage, kubernetes.Interface) error
}

// Stage is a moment of a maintenance scenario's run.
type Stage string

// Stages Observe is called at.
const (
	// StageMaintenanceStart: every workload Ready, nothing touched yet.
	StageMaintenanceStart Stage = "maintenance-start"
	// StageEnd: the maintenance done and the workloads Ready again (or given up on).
	StageEnd Stage = "end"
)

type nodeVersion struct {
	rv   uint64
	node *v1.Node
}

type binding struct {
	rv   uint64
	node string
	at   time.Time
}

// recorder watches nodes and pods so that every binding can be judged against the node as it
// was at that moment (resourceVersions are etcd revisions: one global order).
type recorder struct {
	mu       sync.Mutex
	versions map[string][]nodeVersion
	bindings map[string]binding
	lastSeen time.Time
	// optedIn counts pods created without schedulerName that came back with one.
	optedIn int
}

func (r *recorder) watch(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			r.mu.Lock()
			switch o := ev.Object.(type) {
			case *v1.Node:
				rv, _ := strconv.ParseUint(o.ResourceVersion, 10, 64)
				r.versions[o.Name] = append(r.versions[o.Name], nodeVersion{rv: rv, node: o})
			case *v1.Pod:
				key := o.Namespace + "/" + o.Name
				if _, seen := r.bindings[key]; !seen && o.Spec.NodeName != "" {
					rv, _ := strconv.ParseUint(o.ResourceVersion, 10, 64)
					r.bindings[key] = binding{rv: rv, node: o.Spec.NodeName, at: time.Now()}
					r.lastSeen = time.Now()
				}
			}
			r.mu.Unlock()
		}
	}
}

// countOptIn counts p if it was created without schedulerName and got one from admission.
func (r *recorder) countOptIn(requested string, p *v1.Pod) {
	if requested == "" && p.Spec.SchedulerName != v1.DefaultSchedulerName {
		r.mu.Lock()
		r.optedIn++
		r.mu.Unlock()
	}
}

// nodeAt returns the node as it was just before revision rv.
func (r *recorder) nodeAt(name string, rv uint64) *v1.Node {
	var found *v1.Node
	for _, v := range r.versions[name] {
		if v.rv < rv {
			found = v.node
		}
	}
	return found
}

// Run runs the scenario under one mode on a fresh embedded control plane.
func Run(ctx context.Context, sc *Scenario, mode Mode, opts Options) (*Result, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Settle == 0 {
		opts.Settle = 2 * time.Second
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
		if sc.Maintenance != nil {
			opts.Timeout = 30 * time.Minute
		}
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("%s / %s: ", sc.Name, mode.Name) + fmt.Sprintf(format, args...))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	optIn := sc.OptInByLabel && mode.Profile.SchedulerName != v1.DefaultSchedulerName
	// The MutatingAdmissionPolicy API (beta, off by default in 1.34) for optInByLabel, in every
	// run: apiservers running at once in this process (--parallel) share the process-wide
	// feature gates, so they must all be started with the same ones.
	cpOpts := controlplane.Options{Flags: []string{"--feature-gates=MutatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true"}}
	progress("starting etcd and kube-apiserver")
	cp, err := controlplane.StartStandalone(ctx, opts.Log, cpOpts)
	if err != nil {
		return nil, err
	}
	// Close the watches and the scheduler first: the apiserver waits for open requests to drain.
	defer func() {
		cancel()
		cp.Stop()
	}()
	cs := cp.Client

	for _, ns := range namespaces(sc) {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	if optIn {
		progress("opting namespaces in by label (MutatingAdmissionPolicy)")
		if err := optInNamespaces(ctx, cs, sc, mode.Profile); err != nil {
			return nil, err
		}
	}
	for i := range sc.Pools {
		if len(sc.Pools[i].LabelSet) == 0 {
			continue
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(labelSetOf(&sc.Pools[i]))
		if err != nil {
			return nil, err
		}
		if _, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(labelSetNS).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating NodePoolLabelSet %s: %w", sc.Pools[i].Name, err)
		}
	}

	rec := &recorder{versions: map[string][]nodeVersion{}, bindings: map[string]binding{}}
	nodeWatch, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	podWatch, err := cs.CoreV1().Pods(v1.NamespaceAll).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	go rec.watch(ctx, nodeWatch)
	go rec.watch(ctx, podWatch)

	for i := range sc.Pools {
		p := &sc.Pools[i]
		for j := 0; j < p.Nodes; j++ {
			node := sc.buildNode(p, j, true)
			if m := sc.Maintenance; m != nil && m.Pool == p.Name {
				aksemu.SetVersion(node, m.FromNodeImage, m.FromKubelet)
			}
			if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range sc.Services {
		if _, err := cs.CoreV1().Services(s.Namespace).Create(ctx, service(&s), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	progress("starting the %s scheduler", mode.Name)
	schedCtx, stopScheduler := context.WithCancel(ctx)
	defer stopScheduler()
	if err := startScheduler(schedCtx, cp, mode.Profile); err != nil {
		return nil, err
	}

	schedulerName := func(w *Workload) string {
		if optIn && w.Namespace != metav1.NamespaceSystem {
			return "" // no pod edited: the admission path sets it
		}
		return mode.Profile.SchedulerName
	}
	start := time.Now()
	if sc.Maintenance != nil {
		observe := func(ctx context.Context, stage Stage) error {
			if opts.Observe == nil {
				return nil
			}
			return opts.Observe(ctx, stage, cs)
		}
		maint, err := runMaintenance(ctx, cp, sc, schedulerName, progress, observe)
		if err != nil {
			return nil, fmt.Errorf("%s / %s: %w", sc.Name, mode.Name, err)
		}
		if err := observe(ctx, StageEnd); err != nil {
			return nil, err
		}
		elapsed := time.Since(start)
		progress("measuring")
		stopScheduler()
		r, err := measure(ctx, cp, sc, mode, rec, &sync.Map{}, start, elapsed)
		if r != nil {
			r.Maintenance = maint
		}
		return r, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(sc.Pools)+len(sc.Workloads))
	labelledAt := sync.Map{} // node name -> time its pool labels landed
	for i := range sc.Pools {
		p := &sc.Pools[i]
		if p.JoiningNodes == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sc.join(ctx, cs, p, start, &labelledAt); err != nil {
				errs <- err
			}
		}()
	}
	total := 0
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		total += w.ReplicaSets * w.Replicas
		if w.Rollout {
			total += w.ReplicaSets * w.Replicas
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runWorkload(ctx, cs, w, schedulerName(w), start, rec); err != nil {
				errs <- err
			}
		}()
	}
	progress("creating %d pods", total)
	created := make(chan struct{})
	go func() { wg.Wait(); close(created) }()

	// Settle: every generator done (pods created, nodes joined and labelled), and no new
	// binding for opts.Settle since then: quiet counts from the last binding or from the last
	// generator's end, whichever is later, so a slow machine's wait for the last labels' pods
	// is not taken for the end.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	done := false
	var createdAt time.Time
	for !done {
		select {
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("%s / %s did not settle within %v", sc.Name, mode.Name, opts.Timeout)
		case <-tick.C:
			select {
			case <-created:
				if createdAt.IsZero() {
					createdAt = time.Now()
				}
				rec.mu.Lock()
				bound, last := len(rec.bindings), rec.lastSeen
				rec.mu.Unlock()
				if last.Before(createdAt) {
					last = createdAt
				}
				if bound >= total || time.Since(last) > opts.Settle {
					done = true
				}
			default:
			}
		}
	}
	elapsed := time.Since(start)
	progress("measuring")
	stopScheduler()
	r, err := measure(ctx, cp, sc, mode, rec, &labelledAt, start, elapsed)
	if r != nil {
		rec.mu.Lock()
		r.OptedIn = rec.optedIn
		rec.mu.Unlock()
	}
	return r, err
}

// optInNamespaces labels the workloads' namespaces (but kube-system) for pool-scheduler and
// installs the MutatingAdmissionPolicy of prof, then waits until a dry-run pod is mutated
// (admission picks policies up from an informer).
func optInNamespaces(ctx context.Context, cs kubernetes.Interface, sc *Scenario, prof schedconfig.KubeSchedulerProfile) error {
	args, err := profile.ArgsFromProfile(&prof)
	if err != nil {
		return err
	}
	policy, binding, err := admission.RenderPolicy(admission.PolicyOptions{Name: "pool-scheduler", SchedulerName: prof.SchedulerName,
		Guard: args.SystemPoolGuard, Namespaces: admission.NamespaceSelector([]string{metav1.NamespaceSystem})})
	if err != nil {
		return err
	}
	if _, err := cs.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the MutatingAdmissionPolicy: %w", err)
	}
	if _, err := cs.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the MutatingAdmissionPolicyBinding: %w", err)
	}
	var probeNS string
	for _, w := range sc.Workloads {
		if w.Namespace == metav1.NamespaceSystem {
			continue
		}
		probeNS = w.Namespace
		patch := []byte(`{"metadata":{"labels":{"` + profile.NamespaceLabel + `":"true"}}}`)
		if _, err := cs.CoreV1().Namespaces().Patch(ctx, w.Namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	if probeNS == "" {
		return nil
	}
	probe := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "opt-in-probe"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(probeNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return p.Spec.SchedulerName == prof.SchedulerName, nil
	})
}

func namespaces(sc *Scenario) []string {
	set := sets.New(labelSetNS)
	for _, w := range sc.Workloads {
		set.Insert(w.Namespace)
	}
	for _, s := range sc.Services {
		set.Insert(s.Namespace)
	}
	return sets.List(set)
}

// join adds a pool's joining nodes with only their pool label, then applies the pool's labels
// after the delay, as an asynchronous labeler would.
func (sc *Scenario) join(ctx context.Context, cs kubernetes.Interface, p *Pool, start time.Time, labelledAt *sync.Map) error {
	if err := sleepUntil(ctx, start.Add(p.JoinAfter.Duration)); err != nil {
		return nil
	}
	for j := p.Nodes; j < p.Nodes+p.JoiningNodes; j++ {
		if _, err := cs.CoreV1().Nodes().Create(ctx, sc.buildNode(p, j, false), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("joining node: %w", err)
		}
	}
	if len(p.LabelSet) == 0 {
		return nil
	}
	if err := sleepUntil(ctx, time.Now().Add(p.LabelDelay.Duration)); err != nil {
		return nil
	}
	for j := p.Nodes; j < p.Nodes+p.JoiningNodes; j++ {
		name := sc.nodeName(p, j)
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		applyLabelSet(node, p)
		// Latency counts from the moment the labels are sent: a pod may bind before the update's
		// response arrives.
		sent := time.Now()
		if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("labelling node %s: %w", name, err)
		}
		labelledAt.Store(name, sent)
	}
	return nil
}

// runWorkload creates the workload's ReplicaSets pod by pod, then rolls them out if asked: a
// new revision's pods are created while the old ones are left terminating.
func runWorkload(ctx context.Context, cs kubernetes.Interface, w *Workload, schedulerName string, start time.Time, rec *recorder) error {
	if err := sleepUntil(ctx, start.Add(w.StartAfter.Duration)); err != nil {
		return nil
	}
	var sets []*appsv1.ReplicaSet
	for i := 0; i < w.ReplicaSets; i++ {
		rs, err := cs.AppsV1().ReplicaSets(w.Namespace).Create(ctx, replicaSet(w, i, 1), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		sets = append(sets, rs)
	}
	// Pod by pod, interleaving the sets as a busy cluster would.
	var pods []*v1.Pod
	for j := 0; j < w.Replicas; j++ {
		for _, rs := range sets {
			p, err := cs.CoreV1().Pods(w.Namespace).Create(ctx, replica(w, rs, j, schedulerName), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			rec.countOptIn(schedulerName, p)
			pods = append(pods, p)
		}
	}
	if !w.Rollout {
		return nil
	}
	// Roll out once the first revision is placed (or has waited long enough).
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		bound := 0
		for _, p := range pods {
			if _, ok := rec.bindings[p.Namespace+"/"+p.Name]; ok {
				bound++
			}
		}
		rec.mu.Unlock()
		if bound == len(pods) {
			break
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return nil
		}
	}
	for i, old := range sets {
		rs, err := cs.AppsV1().ReplicaSets(w.Namespace).Create(ctx, replicaSet(w, i, 2), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		for j := 0; j < w.Replicas; j++ {
			p, err := cs.CoreV1().Pods(w.Namespace).Create(ctx, replica(w, rs, j, schedulerName), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			rec.countOptIn(schedulerName, p)
			// Surge one, then retire one old pod, which stays terminating (its finalizer).
			oldPod := fmt.Sprintf("%s-%d", old.Name, j)
			if err := cs.CoreV1().Pods(w.Namespace).Delete(ctx, oldPod, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func measure(ctx context.Context, cp *controlplane.ControlPlane, sc *Scenario, mode Mode, rec *recorder, labelledAt *sync.Map, start time.Time, elapsed time.Duration) (*Result, error) {
	cs := cp.Client
	nodeList, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	podList, err := cs.CoreV1().Pods(v1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	svcList, err := cs.CoreV1().Services(v1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	in := report.Inputs{}
	for i := range nodeList.Items {
		in.Nodes = append(in.Nodes, &nodeList.Items[i])
	}
	for i := range podList.Items {
		in.Pods = append(in.Pods, &podList.Items[i])
	}
	for i := range svcList.Items {
		in.Services = append(in.Services, &svcList.Items[i])
	}
	var sets []*labelsv1alpha1.NodePoolLabelSet
	for i := range sc.Pools {
		if len(sc.Pools[i].LabelSet) > 0 {
			sets = append(sets, labelSetOf(&sc.Pools[i]))
		}
	}
	policy, err := sc.Policy()
	if err != nil {
		return nil, err
	}
	// As the gate compiles them: a label on a system-node key is not waited for (pool.RefusedKey).
	in.LabelSets = policy.Gate.CompileLabelSets(sets)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	in.NodeAtBinding = func(p *v1.Pod) *v1.Node {
		b, ok := rec.bindings[p.Namespace+"/"+p.Name]
		if !ok {
			return nil
		}
		return rec.nodeAt(b.node, b.rv)
	}
	rep := report.Compute(in, policy)

	res := &Result{Scenario: sc.Name, Mode: mode.Name, Report: rep, Elapsed: elapsed}
	var latencies []time.Duration
	var last time.Time
	for _, p := range in.Pods {
		if p.Namespace == "kube-system" && metav1.GetControllerOfNoCopy(p) == nil {
			continue
		}
		res.Pods++
		b, ok := rec.bindings[p.Namespace+"/"+p.Name]
		if !ok {
			continue
		}
		res.Bound++
		if b.at.After(last) {
			last = b.at
		}
		if t, ok := labelledAt.Load(b.node); ok && b.at.After(t.(time.Time)) {
			latencies = append(latencies, b.at.Sub(t.(time.Time)))
		}
	}
	if d := last.Sub(start); d > 0 {
		res.Throughput = float64(res.Bound) / d.Seconds()
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	if n := len(latencies); n > 0 {
		res.LabelToBindP50 = latencies[n/2]
		res.LabelToBindP99 = latencies[min(n-1, n*99/100)]
	}
	return res, nil
}

// Policy is what the simulator measures against: the shipped profile's args (what
// pool-scheduler enforces), and the scenario's load balancer.
func (sc *Scenario) Policy() (report.Policy, error) {
	args, err := profile.LoadArgs(shipped.Config, "")
	if err != nil {
		return report.Policy{}, fmt.Errorf("manifests/scheduler/config.yaml: %w", err)
	}
	policy, err := report.NewPolicy(args)
	if err != nil {
		return report.Policy{}, err
	}
	if a := sc.Azure; a != nil {
		policy.LoadBalancer.AzureSKU = a.LoadBalancerSKU
		for i := range sc.Pools {
			if sc.Pools[i].Name == a.PrimaryPool {
				policy.LoadBalancer.AzurePrimaryVMSet = sc.VMSetName(&sc.Pools[i])
			}
		}
	}
	return policy, nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
