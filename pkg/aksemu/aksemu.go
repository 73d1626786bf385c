// Package aksemu emulates the node operations AKS and Karpenter (AKS Node Auto Provisioning)
// play on a pool: AKS's surge upgrade (surge nodes, batches cordoned, drained through the
// Eviction API and reimaged in place) and blue-green upgrade, and Karpenter's consolidation,
// against any API server. It runs an UpgradePlan, which the caller fills (pkg/simulate from a
// scenario's maintenance), and records what the operation did to the workloads: evictions,
// refused evictions and each ReplicaSet's Ready replicas over time. It knows no scenario:
// what it needs of the cluster comes in the plan.
package aksemu

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/maintenance"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// The operations.
const (
	// SurgeUpgrade is AKS's rolling upgrade (Kubernetes version or node image): surge nodes,
	// batches of old nodes cordoned, drained and reimaged in place, surge nodes removed.
	SurgeUpgrade = "surgeUpgrade"
	// BlueGreen is AKS's blue-green pool upgrade (preview): every old (blue) node cordoned, as
	// many new (green) nodes added, blue drained in batches with soaks, then deleted.
	BlueGreen = "blueGreen"
	// Consolidation is Karpenter's (AKS Node Auto Provisioning's) disruption of a budget of
	// nodes at a time: tainted, replacements started and Ready, drained, deleted; waves until
	// every old node is replaced (as drift to a new image does).
	Consolidation = "consolidation"
)

// Node labels and annotations AKS writes during an upgrade (docs/maintenance.md).
const (
	// UpgradeStatusLabel marks a node AKS quarantined (undrainable: Cordon).
	UpgradeStatusLabel      = "kubernetes.azure.com/upgrade-status"
	upgradeStatusQuarantine = "Quarantined"
	// AKS keeps the cluster autoscaler off the pool's nodes while it upgrades them.
	scaleDownDisabledAnnotation       = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	scaleDownDisabledReasonAnnotation = "kubernetes.azure.com/azure-cluster-autoscaler-scale-down-disabled-reason"
	// evictionRetry is how often AKS retries an eviction a PodDisruptionBudget refused
	// (Azure/AKS#4720: about every 5 s), in AKS time.
	evictionRetry = 5 * time.Second
)

// UpgradePlan is one operation on one pool, settings resolved: what the caller fills and Run
// plays. Durations are AKS time; the run compresses them by TimeScale.
type UpgradePlan struct {
	// Kind is SurgeUpgrade, BlueGreen or Consolidation.
	Kind string
	// Nodes are the pool's nodes, in the pool's order; the operation takes them in an order
	// drawn from Seed. Zones is the pool's zones (0: not zonal), which new nodes are drawn from.
	Nodes []string
	Zones int
	// MaxSurge (SurgeUpgrade) is the surge nodes asked for, capped here at the pool's nodes;
	// MaxSurgeSetting the setting as written, for the progress line.
	MaxSurge        int
	MaxSurgeSetting string
	// QuarantineUndrainable (SurgeUpgrade): a node still undrained at DrainTimeout is
	// quarantined (AKS's undrainableNodeBehavior Cordon) and the upgrade goes on; otherwise
	// (Schedule) the blocked nodes are uncordoned and the upgrade ends failed.
	QuarantineUndrainable bool
	// KeepNodeOnReimage (SurgeUpgrade): a reimage updates the same Node object; otherwise it
	// deletes it and registers a new one under the same name.
	KeepNodeOnReimage bool
	// DrainBatchSize (BlueGreen) is the blue nodes drained at once; BatchSoak the wait after
	// each batch, FinalSoak the wait before blue is deleted.
	DrainBatchSize       int
	BatchSoak, FinalSoak time.Duration
	// Budget (Consolidation) is the nodes disrupted at once.
	Budget int
	// DrainTimeout bounds each node's drain; NodeSoak is the wait after a node's drain before
	// its reimage; ReimageTime how long a reimaged node stays NotReady; ProvisionTime how long a
	// new node takes to join.
	DrainTimeout, NodeSoak, ReimageTime, ProvisionTime time.Duration
	// Seed fixes the random choices (node order, new nodes' zones).
	Seed int64
	// TimeScale is AKS time per real time.
	TimeScale float64
	// ToNodeImage and ToKubelet are the new nodes' kubernetes.azure.com/node-image-version and
	// status.nodeInfo.kubeletVersion.
	ToNodeImage, ToKubelet string
	// Workloads are the ReplicaSets whose Ready replicas are recorded; Run waits until all are
	// Ready before it starts, and again after the operation.
	Workloads []Workload

	// NewNode returns the operation's i-th new node (0 first) of the pool, in zone index zone
	// (-1: the pool's round-robin zone), as it joins; Run sets its image and kubelet version.
	NewNode func(i, zone int) *v1.Node
	// Progress reports a step (printf style); nil: none.
	Progress func(format string, args ...any)
	// Start, if set, is called once every workload is Ready, before the operation begins.
	Start func(context.Context) error
}

// Workload is a ReplicaSet the operation's record follows.
type Workload struct {
	// Name is namespace/replicaset/name, as pkg/report names workloads.
	Name     string
	Replicas int
	// PDB says whether a PodDisruptionBudget covers it.
	PDB bool
}

// Validate says what in p would keep Run from ending or from playing the operation: each
// operation's step (surge nodes, drain batch, budget) at least one node, a positive time scale,
// a pool with nodes, and NewNode for the operations that add nodes.
func (p *UpgradePlan) Validate() error {
	var errs []error
	step := map[string]struct {
		name string
		n    int
	}{SurgeUpgrade: {"MaxSurge", p.MaxSurge}, BlueGreen: {"DrainBatchSize", p.DrainBatchSize}, Consolidation: {"Budget", p.Budget}}
	s, ok := step[p.Kind]
	switch {
	case !ok:
		errs = append(errs, fmt.Errorf("kind %q is not %s, %s or %s", p.Kind, SurgeUpgrade, BlueGreen, Consolidation))
	case s.n < 1:
		errs = append(errs, fmt.Errorf("%s %s: %d, want at least 1 node", p.Kind, s.name, s.n))
	}
	if !(p.TimeScale > 0) {
		errs = append(errs, fmt.Errorf("TimeScale %v: want a positive number", p.TimeScale))
	}
	if len(p.Nodes) == 0 {
		errs = append(errs, errors.New("Nodes: the pool has none"))
	}
	if p.NewNode == nil {
		errs = append(errs, errors.New("NewNode: nil (every operation adds or re-registers nodes)"))
	}
	return errors.Join(errs...)
}

// sim converts an AKS duration into the run's real time.
func (p *UpgradePlan) sim(d time.Duration) time.Duration {
	return time.Duration(float64(d) / p.TimeScale)
}

// Run waits until every workload of the plan is Ready, plays the operation and waits until
// they are Ready again (at most DrainTimeout in AKS time and 10 s), and returns its record.
func Run(ctx context.Context, cs kubernetes.Interface, plan *UpgradePlan) (*Result, error) {
	if err := plan.Validate(); err != nil {
		return nil, fmt.Errorf("upgrade plan: %w", err)
	}
	progress := plan.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	var begin time.Time
	t := &readyTracker{pods: map[string]podState{}, ready: map[string]int{}, wl: map[string]*MaintainedWorkload{},
		clock: func() float64 { return time.Since(begin).Minutes() * plan.TimeScale }}
	for _, w := range plan.Workloads {
		t.wl[w.Name] = &MaintainedWorkload{Name: w.Name, Replicas: w.Replicas, Floor: Floor(w.Replicas), PDB: w.PDB}
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observeObj(obj, false) },
		UpdateFunc: func(_, obj any) { t.observeObj(obj, false) },
		DeleteFunc: func(obj any) { t.observeObj(obj, true) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	replicas := 0
	for _, w := range t.wl {
		replicas += w.Replicas
	}
	progress("waiting until the %d replicas of %d ReplicaSets are Ready", replicas, len(t.wl))
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return t.allReady(), nil }); err != nil {
		return nil, fmt.Errorf("workloads not Ready before the maintenance: %w", err)
	}
	u := &upgrader{cs: cs, plan: plan, rng: rand.New(rand.NewSource(plan.Seed)), progress: progress,
		evictions: map[string]int{}, refusals: map[string]int{}, res: &Result{Kind: plan.Kind, Outcome: OutcomeSucceeded, Replicas: replicas}}
	play := map[string]func(context.Context) error{SurgeUpgrade: u.surgeUpgrade, BlueGreen: u.blueGreen, Consolidation: u.consolidation}[plan.Kind]
	if plan.Start != nil {
		if err := plan.Start(ctx); err != nil {
			return nil, err
		}
	}
	begin = time.Now()
	t.start()
	if err := play(ctx); err != nil {
		return nil, err
	}
	res := u.res
	res.Minutes = t.clock()
	t.stop()
	progress("maintenance done in %.0f simulated minutes; waiting until every workload is Ready again", res.Minutes)
	// The end state (skew) is measured once the last evicted pods are back; a workload that
	// cannot come back leaves it as it is.
	settle, cancel := context.WithTimeout(ctx, plan.sim(plan.DrainTimeout)+10*time.Second)
	defer cancel()
	_ = wait.PollUntilContextCancel(settle, 100*time.Millisecond, true, func(context.Context) (bool, error) { return t.allReady(), nil })

	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.wl {
		w.Evictions, w.Refusals = u.evictions[w.Name], u.refusals[w.Name]
		res.Evictions += w.Evictions
		res.Refusals += w.Refusals
		if w.Replicas >= 3 && w.MinReady < w.Floor {
			res.BelowFloor++
		}
		res.Workloads = append(res.Workloads, *w)
	}
	sort.Slice(res.Workloads, func(i, j int) bool { return res.Workloads[i].Name < res.Workloads[j].Name })
	if replicas > 0 {
		res.EvictionsPerReplica = float64(res.Evictions) / float64(replicas)
		res.RefusalsPerReplica = float64(res.Refusals) / float64(replicas)
	}
	return res, nil
}

// upgrader plays a maintenance (surge upgrade, blue-green upgrade, consolidation) on one pool.
type upgrader struct {
	cs       kubernetes.Interface
	plan     *UpgradePlan
	rng      *rand.Rand
	progress func(string, ...any)

	mu                  sync.Mutex
	evictions, refusals map[string]int
	res                 *Result
}

// sleep waits d of AKS time.
func (u *upgrader) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(u.plan.sim(d)):
		return nil
	}
}

// draw returns the pool's original nodes in the random (seeded) order the maintenance takes
// them, and the zones of newZones new nodes. The zones are drawn first, so both modes draw the
// same zones and order from the seed.
func (u *upgrader) draw(newZones int) (nodes []string, zones []int) {
	nodes = slices.Clone(u.plan.Nodes)
	if newZones > 0 {
		zones = u.randomZones(newZones)
	}
	u.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	return nodes, zones
}

// surgeUpgrade: surge nodes, then batches of old nodes in random order (cordon, drain in
// parallel through the Eviction API, soak, reimage in place), then the surge nodes drained
// and deleted.
func (u *upgrader) surgeUpgrade(ctx context.Context) error {
	n := len(u.plan.Nodes)
	surge := min(u.plan.MaxSurge, n)
	u.res.Floor = 1 + float64(surge)/float64(n)
	old, zones := u.draw(surge)

	for _, name := range old {
		if err := u.updateNode(ctx, name, func(node *v1.Node) {
			node.Annotations[scaleDownDisabledAnnotation] = "true"
			node.Annotations[scaleDownDisabledReasonAnnotation] = "upgrade"
		}); err != nil {
			return err
		}
	}
	u.progress("surge: %d new nodes (maxSurge %s of %d)", surge, u.plan.MaxSurgeSetting, n)
	surgeNodes, err := u.addNodes(ctx, zones)
	if err != nil {
		return err
	}

	var blocked []string
	for start := 0; start < len(old); start += surge {
		batch := old[start:min(start+surge, len(old))]
		u.progress("batch %d of %d: cordon and drain %s", start/surge+1, (len(old)+surge-1)/surge, nodeList(batch))
		for _, name := range batch {
			if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Spec.Unschedulable = true }); err != nil {
				return err
			}
		}
		drained := make([]bool, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, name := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				drained[i], errs[i] = u.drain(ctx, name)
				if errs[i] == nil && drained[i] {
					if errs[i] = u.sleep(ctx, u.plan.NodeSoak); errs[i] == nil {
						errs[i] = u.reimage(ctx, name)
					}
				}
			}()
		}
		wg.Wait()
		for i, name := range batch {
			if errs[i] != nil {
				return errs[i]
			}
			if drained[i] {
				u.res.ReimagedNodes = append(u.res.ReimagedNodes, name)
			} else {
				blocked = append(blocked, name)
			}
		}
		if len(blocked) == 0 {
			continue
		}
		if !u.plan.QuarantineUndrainable {
			// The blocked nodes are made schedulable, not upgraded; the operation fails and
			// the surge nodes are deleted (best effort): the next PUT would resume.
			for _, name := range blocked {
				if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Spec.Unschedulable = false }); err != nil {
					return err
				}
			}
			u.res.Outcome = OutcomeFailed
			break
		}
		for _, name := range blocked {
			if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Labels[UpgradeStatusLabel] = upgradeStatusQuarantine }); err != nil {
				return err
			}
		}
		u.res.QuarantinedNodes = append(u.res.QuarantinedNodes, blocked...)
		u.res.Outcome = OutcomeFailed
		blocked = nil
	}
	// A surge node is retained for each quarantined node; the others go.
	remove := surgeNodes[min(len(u.res.QuarantinedNodes), len(surgeNodes)):]
	u.progress("removing surge nodes: %s", nodeList(remove))
	for _, name := range remove {
		if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Spec.Unschedulable = true }); err != nil {
			return err
		}
	}
	// Deleted whether drained or not: the VM goes, and with it what still runs there.
	if _, err := u.drainAll(ctx, remove, func(ctx context.Context, name string, _ bool) error { return u.deleteNode(ctx, name) }); err != nil {
		return err
	}
	u.res.RemovedNodes = append(u.res.RemovedNodes, remove...)
	for _, name := range old {
		if err := u.updateNode(ctx, name, func(node *v1.Node) {
			delete(node.Annotations, scaleDownDisabledAnnotation)
			delete(node.Annotations, scaleDownDisabledReasonAnnotation)
		}); err != nil {
			return err
		}
	}
	return nil
}

// randomZones draws a zone index for each of n new nodes (0 outside zones).
func (u *upgrader) randomZones(n int) []int {
	zones := make([]int, n)
	for i := range zones {
		zones[i] = u.rng.Intn(max(u.plan.Zones, 1))
	}
	return zones
}

// addNodes waits provisionTime, then creates a node (the plan's NewNode) on the new image and
// kubelet per zone index (-1: the pool's round-robin zone).
func (u *upgrader) addNodes(ctx context.Context, zones []int) ([]string, error) {
	if err := u.sleep(ctx, u.plan.ProvisionTime); err != nil {
		return nil, err
	}
	var names []string
	for _, zone := range zones {
		node := u.plan.NewNode(len(u.res.NewNodes), zone)
		SetVersion(node, u.plan.ToNodeImage, u.plan.ToKubelet)
		if _, err := u.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		names = append(names, node.Name)
		u.res.NewNodes = append(u.res.NewNodes, node.Name)
	}
	return names, nil
}

// drainAll drains the nodes in parallel and calls then (if set) for each once its drain
// ended, drained or not; it returns which were drained.
func (u *upgrader) drainAll(ctx context.Context, names []string, then func(ctx context.Context, name string, drained bool) error) ([]bool, error) {
	drained := make([]bool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if drained[i], errs[i] = u.drain(ctx, name); errs[i] == nil && then != nil {
				errs[i] = then(ctx, name, drained[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return drained, nil
}

// blueGreen: every blue node cordoned, as many green nodes added (the green count is not
// documented: assumed N, spread over the zones as the pool is), blue drained drainBatchSize
// nodes at a time in random order with batchSoak after each batch, finalSoak, blue deleted.
// A drain past drainTimeout fails the upgrade: the rest is left as it is.
func (u *upgrader) blueGreen(ctx context.Context) error {
	n := len(u.plan.Nodes)
	batch := min(u.plan.DrainBatchSize, n)
	blue, _ := u.draw(0)
	u.res.Floor = 1
	u.progress("blue-green: cordon %d blue nodes, add %d green", n, n)
	for _, name := range blue {
		if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Spec.Unschedulable = true }); err != nil {
			return err
		}
	}
	zones := make([]int, n)
	for i := range zones {
		zones[i] = -1
	}
	if _, err := u.addNodes(ctx, zones); err != nil {
		return err
	}
	for start := 0; start < n; start += batch {
		names := blue[start:min(start+batch, n)]
		u.progress("batch %d of %d: drain %s", start/batch+1, (n+batch-1)/batch, nodeList(names))
		drained, err := u.drainAll(ctx, names, nil)
		if err != nil {
			return err
		}
		if slices.Contains(drained, false) {
			u.res.Outcome = OutcomeFailed
			return nil
		}
		if start+batch < n {
			if err := u.sleep(ctx, u.plan.BatchSoak); err != nil {
				return err
			}
		}
	}
	if err := u.sleep(ctx, u.plan.FinalSoak); err != nil {
		return err
	}
	for _, name := range blue {
		if err := u.deleteNode(ctx, name); err != nil {
			return err
		}
		u.res.RemovedNodes = append(u.res.RemovedNodes, name)
	}
	return nil
}

// consolidation: waves of budget nodes in random order, each tainted
// karpenter.sh/disrupted:NoSchedule, as many replacements started (zones drawn at random) and
// Ready, then drained (PodDisruptionBudgets honoured) and deleted, until every old node is
// replaced. A drain past drainTimeout stops it (Karpenter itself would keep waiting).
func (u *upgrader) consolidation(ctx context.Context) error {
	n := len(u.plan.Nodes)
	budget := min(u.plan.Budget, n)
	old, zones := u.draw(n)
	disrupted := v1.Taint{Key: maintenance.TaintKarpenterDisrupted, Effect: v1.TaintEffectNoSchedule}
	for start := 0; start < n; start += budget {
		names := old[start:min(start+budget, n)]
		u.progress("wave %d of %d: disrupt %s", start/budget+1, (n+budget-1)/budget, nodeList(names))
		for _, name := range names {
			if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Spec.Taints = append(node.Spec.Taints, disrupted) }); err != nil {
				return err
			}
		}
		if _, err := u.addNodes(ctx, zones[start:start+len(names)]); err != nil {
			return err
		}
		drained, err := u.drainAll(ctx, names, func(ctx context.Context, name string, drained bool) error {
			if !drained {
				return nil
			}
			u.mu.Lock()
			u.res.RemovedNodes = append(u.res.RemovedNodes, name)
			u.mu.Unlock()
			return u.deleteNode(ctx, name)
		})
		if err != nil {
			return err
		}
		if slices.Contains(drained, false) {
			u.res.Outcome = OutcomeFailed
			return nil
		}
	}
	return nil
}

// drain evicts every pod on the node but DaemonSet pods through the Eviction API, in
// parallel, retrying refusals, and waits until they are gone; false if the deadline
// (drainTimeout) came first.
func (u *upgrader) drain(ctx context.Context, node string) (bool, error) {
	deadline := time.Now().Add(u.plan.sim(u.plan.DrainTimeout))
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	list, err := u.cs.CoreV1().Pods(v1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return false, err
	}
	var wg sync.WaitGroup
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || pool.IsDaemonSetPod(p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			u.evict(dctx, p)
		}()
	}
	wg.Wait()
	// Evicted pods are gone once the kubelet has stopped them.
	err = wait.PollUntilContextCancel(dctx, u.plan.sim(evictionRetry)/5+10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left, err := u.cs.CoreV1().Pods(v1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return false, nil
		}
		for i := range left.Items {
			if !pool.IsDaemonSetPod(&left.Items[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return err == nil, nil
}

// evict asks the Eviction API to evict p until it does or ctx ends; a refusal (429: a
// PodDisruptionBudget) is counted and retried as AKS retries it. Any other error is retried
// uncounted, a 429 without the budget's cause included (API Priority and Fairness shedding a
// loaded API server's requests): counted, it would be a budget refusal of a workload without one.
func (u *upgrader) evict(ctx context.Context, p *v1.Pod) {
	owner := ownerName(p)
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))}}
	for {
		err := u.cs.CoreV1().Pods(p.Namespace).EvictV1(ctx, eviction)
		switch {
		case err == nil:
			u.mu.Lock()
			u.evictions[owner]++
			u.mu.Unlock()
			return
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return // gone, or another pod of that name
		case budgetRefusal(err):
			u.mu.Lock()
			u.refusals[owner]++
			u.mu.Unlock()
		}
		if u.sleep(ctx, evictionRetry) != nil {
			return
		}
	}
}

// budgetRefusal reports whether the Eviction API refused because of a PodDisruptionBudget: 429
// with the DisruptionBudget cause (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go,
// createTooManyRequestsError and the budget check, v1.34.10 and v1.36.3).
func budgetRefusal(err error) bool {
	return apierrors.IsTooManyRequests(err) && apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause)
}

// reimage rebuilds the node in place: the same Node object is NotReady (as the node lifecycle
// controller marks it: condition and taint) for reimageTime, then Ready on the new image and
// kubelet, uncordoned.
func (u *upgrader) reimage(ctx context.Context, name string) error {
	notReady := v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}
	if err := u.updateNode(ctx, name, func(node *v1.Node) { node.Spec.Taints = append(node.Spec.Taints, notReady) }); err != nil {
		return err
	}
	if err := u.setReady(ctx, name, v1.ConditionFalse, ""); err != nil {
		return err
	}
	if !u.plan.KeepNodeOnReimage {
		return u.registerAgain(ctx, name)
	}
	if err := u.sleep(ctx, u.plan.ReimageTime); err != nil {
		return err
	}
	if err := u.setReady(ctx, name, v1.ConditionTrue, u.plan.ToKubelet); err != nil {
		return err
	}
	return u.updateNode(ctx, name, func(node *v1.Node) {
		node.Labels[maintenance.NodeImageVersionLabel] = u.plan.ToNodeImage
		node.Spec.Unschedulable = false
		var kept []v1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != v1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		node.Spec.Taints = kept
	})
}

// registerAgain plays a reimage that replaces the Node object: the old one is deleted (with
// the DaemonSet pods still bound to it, as the pod garbage collector deletes them), and after
// reimageTime the kubelet registers a new one under the same name, Ready, schedulable, on the
// new image and kubelet, with the labels it had (the pool's labels come from kubelet flags).
func (u *upgrader) registerAgain(ctx context.Context, name string) error {
	old, err := u.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := u.deleteNode(ctx, name); err != nil {
		return err
	}
	if err := u.sleep(ctx, u.plan.ReimageTime); err != nil {
		return err
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: old.Labels, Annotations: old.Annotations},
		Spec: v1.NodeSpec{ProviderID: old.Spec.ProviderID}, Status: *old.Status.DeepCopy()}
	for _, t := range old.Spec.Taints {
		if t.Key != v1.TaintNodeNotReady {
			node.Spec.Taints = append(node.Spec.Taints, t)
		}
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == v1.NodeReady {
			node.Status.Conditions[i].Status = v1.ConditionTrue
			node.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	SetVersion(node, u.plan.ToNodeImage, u.plan.ToKubelet)
	if _, err := u.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering reimaged node %s again: %w", name, err)
	}
	return nil
}

func (u *upgrader) setReady(ctx context.Context, name string, status v1.ConditionStatus, kubelet string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := u.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == v1.NodeReady {
				node.Status.Conditions[i].Status = status
				node.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		if kubelet != "" {
			node.Status.NodeInfo.KubeletVersion = kubelet
		}
		_, err = u.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func (u *upgrader) updateNode(ctx context.Context, name string, mutate func(*v1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := u.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		mutate(node)
		_, err = u.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// deleteNode deletes the Node and the pods still bound to it, as the pod garbage collector
// deletes pods of a node that no longer exists.
func (u *upgrader) deleteNode(ctx context.Context, name string) error {
	if err := u.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	left, err := u.cs.CoreV1().Pods(v1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		return err
	}
	for _, p := range left.Items {
		if err := u.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// SetVersion labels the node with its image and sets its kubelet version, as AKS leaves them.
func SetVersion(node *v1.Node, image, kubelet string) {
	node.Labels[maintenance.NodeImageVersionLabel] = image
	node.Status.NodeInfo.KubeletVersion = kubelet
}

// nodeList names a few nodes, or counts many, for a progress line.
func nodeList(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%d nodes (%s, ...)", len(names), names[0])
}
