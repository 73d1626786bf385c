package simulate

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/kubesim"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
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

// Maintenance outcomes.
const (
	OutcomeSucceeded = "Succeeded"
	OutcomeFailed    = "Failed"
)

// MaintenanceResult is what a maintenance did to the workloads.
type MaintenanceResult struct {
	Kind    string `json:"kind"`
	Outcome string `json:"outcome"`
	// Replicas is the workloads' replicas in all; the per-replica figures divide by it.
	Replicas int `json:"replicas"`
	// Evictions are the Eviction API calls that evicted a pod; Refusals those a
	// PodDisruptionBudget refused (429), each retry counted.
	Evictions           int     `json:"evictions"`
	Refusals            int     `json:"refusals"`
	EvictionsPerReplica float64 `json:"evictionsPerReplica"`
	RefusalsPerReplica  float64 `json:"refusalsPerReplica"`
	// Minutes is the maintenance's length in AKS time, from the first surge node asked for to
	// the last surge node deleted.
	Minutes float64 `json:"minutes"`
	// Floor is the fewest evictions per replica any placement could reach in this operation
	// (0: not stated): a surge upgrade's 1 + surge nodes / original nodes (the first batch's
	// replicas have only surge nodes and older nodes to go to, both drained later), a
	// blue-green upgrade's 1.
	Floor float64 `json:"floor,omitempty"`
	// BelowFloor counts workloads of 3 or more replicas that had fewer than Floor Ready at some
	// moment of the maintenance.
	BelowFloor int `json:"belowFloor"`
	// NewNodes are the nodes the operation created (surge, green or replacement nodes);
	// ReimagedNodes those it reimaged in place; RemovedNodes those it deleted.
	NewNodes         []string             `json:"newNodes"`
	ReimagedNodes    []string             `json:"reimagedNodes,omitempty"`
	RemovedNodes     []string             `json:"removedNodes,omitempty"`
	QuarantinedNodes []string             `json:"quarantinedNodes,omitempty"`
	Workloads        []MaintainedWorkload `json:"workloads"`
}

// MaintainedWorkload is one ReplicaSet through the maintenance.
type MaintainedWorkload struct {
	// Name is namespace/replicaset/name, as pkg/report names workloads.
	Name      string `json:"name"`
	Replicas  int    `json:"replicas"`
	Floor     int    `json:"floor"`
	MinReady  int    `json:"minReady"`
	PDB       bool   `json:"pdb,omitempty"`
	Evictions int    `json:"evictions"`
	Refusals  int    `json:"refusals"`
	// Timeline is its Ready replicas (not terminating and Ready, as the ReplicaSet's
	// status.readyReplicas counts them) at each change, in AKS minutes since the start.
	Timeline []ReadyPoint `json:"timeline"`
}

// ReadyPoint is a workload's Ready replicas from a moment on.
type ReadyPoint struct {
	Minute float64 `json:"minute"`
	Ready  int     `json:"ready"`
}

// Floor is the fewest Ready replicas a workload of r replicas may keep during maintenance:
// two thirds, rounded up, for 3 or more (issue #43); smaller workloads have none.
func Floor(r int) int {
	if r < 3 {
		return 0
	}
	return (2*r + 2) / 3
}

// readyTracker counts every ReplicaSet's Ready pods from a pod informer and records, once
// started, their changes and minimum.
type readyTracker struct {
	mu      sync.Mutex
	clock   func() float64 // AKS minutes since the start
	started bool
	pods    map[string]podState
	ready   map[string]int
	wl      map[string]*MaintainedWorkload
}

type podState struct {
	owner string
	ready bool
}

func ownerName(p *v1.Pod) string {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return ""
	}
	return p.Namespace + "/replicaset/" + ref.Name
}

func (t *readyTracker) observe(p *v1.Pod, deleted bool) {
	owner := ownerName(p)
	if owner == "" {
		return
	}
	key := p.Namespace + "/" + p.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.pods[key]
	now := podState{owner: owner, ready: !deleted && p.DeletionTimestamp == nil && podutil.IsPodReady(p)}
	if deleted {
		delete(t.pods, key)
	} else {
		t.pods[key] = now
	}
	if old.ready == now.ready {
		return
	}
	if now.ready {
		t.ready[owner]++
	} else {
		t.ready[owner]--
	}
	if w := t.wl[owner]; w != nil && t.started {
		w.MinReady = min(w.MinReady, t.ready[owner])
		w.Timeline = append(w.Timeline, ReadyPoint{Minute: t.clock(), Ready: t.ready[owner]})
	}
}

// start begins the record: every workload's count now is its first point and minimum.
func (t *readyTracker) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = true
	for name, w := range t.wl {
		w.MinReady = t.ready[name]
		w.Timeline = []ReadyPoint{{Minute: 0, Ready: t.ready[name]}}
	}
}

func (t *readyTracker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		return
	}
	t.started = false
	end := t.clock()
	for name, w := range t.wl {
		w.Timeline = append(w.Timeline, ReadyPoint{Minute: end, Ready: t.ready[name]})
	}
}

func (t *readyTracker) allReady() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, w := range t.wl {
		if t.ready[name] != w.Replicas {
			return false
		}
	}
	return true
}

// maintenanceWorkloads creates the workloads as ReplicaSets (and their PodDisruptionBudgets)
// for the ReplicaSet controller to fill.
func maintenanceWorkloads(ctx context.Context, cs kubernetes.Interface, sc *Scenario, schedulerName func(*Workload) string, t *readyTracker) error {
	floored := 0
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		if sc.Maintenance.BudgetFloor {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, floor.NamespaceLabel)
			if _, err := cs.CoreV1().Namespaces().Patch(ctx, w.Namespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("opting namespace %s in to the budget floor: %w", w.Namespace, err)
			}
		}
		for j := 0; j < w.ReplicaSets; j++ {
			rs := replicaSet(w, j, 1)
			pod := replica(w, rs, 0, schedulerName(w))
			rs.Spec.Template.Spec = pod.Spec
			if sc.Maintenance.BudgetFloor {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: rs.Name, Labels: rs.Labels},
					Spec: appsv1.DeploymentSpec{Replicas: rs.Spec.Replicas, Selector: rs.Spec.Selector, Template: rs.Spec.Template}}
				d, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("creating Deployment %s/%s: %w", rs.Namespace, rs.Name, err)
				}
				rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
				if w.PDB == nil && w.Replicas >= floor.MinReplicas {
					floored++
				}
			}
			if _, err := cs.AppsV1().ReplicaSets(w.Namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating ReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
			}
			budgeted := w.PDB != nil || sc.Maintenance.BudgetFloor && w.Replicas >= floor.MinReplicas
			t.wl[w.Namespace+"/replicaset/"+rs.Name] = &MaintainedWorkload{Name: w.Namespace + "/replicaset/" + rs.Name, Replicas: w.Replicas, Floor: Floor(w.Replicas), PDB: budgeted}
			if w.PDB == nil {
				continue
			}
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: rs.Name},
				Spec:       policyv1.PodDisruptionBudgetSpec{Selector: rs.Spec.Selector},
			}
			if w.PDB.MaxUnavailable != nil {
				pdb.Spec.MaxUnavailable = ptr.To(w.PDB.MaxUnavailable.IntOrString())
			} else {
				pdb.Spec.MinAvailable = ptr.To(w.PDB.MinAvailable.IntOrString())
			}
			if _, err := cs.PolicyV1().PodDisruptionBudgets(rs.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating PodDisruptionBudget %s/%s: %w", pdb.Namespace, pdb.Name, err)
			}
		}
	}
	if floored == 0 {
		return nil
	}
	// The floor's budgets exist before the maintenance starts, as they would in a cluster where
	// it ran before the upgrade.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: floor.ManagedByLabel + "=" + floor.ManagedBy})
		return err == nil && len(l.Items) == floored, nil
	})
}

var setControllerRuntimeLogger sync.Once

// startBudgetFloor runs the budget floor controller in process, as pool-labeler spread
// --budget-floor runs it (its cache options, no leader election), until ctx ends. Runs in
// parallel share the process: the controller's name is not unique in it.
func startBudgetFloor(ctx context.Context, cp *controlplane.ControlPlane) error {
	// controller-runtime's own logger (its informers log through it) goes to klog too, as the
	// manager's; unset, it warns on stderr.
	setControllerRuntimeLogger.Do(func() { ctrllog.SetLogger(klog.Background()) })
	opts := ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: klog.Background(),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}}
	floor.CacheOptions(&opts)
	mgr, err := ctrl.NewManager(cp.Config, opts)
	if err != nil {
		return err
	}
	if err := floor.SetupWithManager(mgr); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}

// runMaintenance starts the controllers and the kubelet stand-in, creates the workloads, waits
// until they are Ready, plays the maintenance and waits until they are Ready again.
func runMaintenance(ctx context.Context, cp *controlplane.ControlPlane, sc *Scenario, schedulerName func(*Workload) string, progress func(string, ...any), observe func(context.Context, Stage) error) (*MaintenanceResult, error) {
	m := sc.Maintenance
	cs := cp.Client
	kubesim.StartReplicaSetController(ctx, cp)
	if err := kubesim.StartDisruptionController(ctx, cp); err != nil {
		return nil, err
	}
	if m.BudgetFloor {
		if err := startBudgetFloor(ctx, cp); err != nil {
			return nil, fmt.Errorf("budget floor: %w", err)
		}
	}
	if err := kubesim.StartKubelet(ctx, cs, kubesim.KubeletOptions{ReadyAfter: m.Sim(m.PodReadyAfter.Duration), Logf: func(string, ...any) {}}); err != nil {
		return nil, err
	}
	var begin time.Time
	t := &readyTracker{pods: map[string]podState{}, ready: map[string]int{}, wl: map[string]*MaintainedWorkload{},
		clock: func() float64 { return time.Since(begin).Minutes() * m.TimeScale }}
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observeObj(obj, false) },
		UpdateFunc: func(_, obj any) { t.observeObj(obj, false) },
		DeleteFunc: func(obj any) { t.observeObj(obj, true) },
	}); err != nil {
		return nil, err
	}
	if err := maintenanceWorkloads(ctx, cs, sc, schedulerName, t); err != nil {
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
	u := &upgrader{cs: cs, sc: sc, m: m, rng: rand.New(rand.NewSource(m.Seed)), progress: progress,
		evictions: map[string]int{}, refusals: map[string]int{}, res: &MaintenanceResult{Kind: m.Kind, Outcome: OutcomeSucceeded, Replicas: replicas}}
	for i := range sc.Pools {
		if sc.Pools[i].Name == m.Pool {
			u.pool = &sc.Pools[i]
		}
	}
	if err := observe(ctx, StageMaintenanceStart); err != nil {
		return nil, err
	}
	begin = time.Now()
	t.start()
	play := map[string]func(context.Context) error{SurgeUpgrade: u.surgeUpgrade, BlueGreen: u.blueGreen, Consolidation: u.consolidation}[m.Kind]
	if err := play(ctx); err != nil {
		return nil, err
	}
	res := u.res
	res.Minutes = t.clock()
	t.stop()
	progress("maintenance done in %.0f simulated minutes; waiting until every workload is Ready again", res.Minutes)
	// The end state (skew) is measured once the last evicted pods are back; a workload that
	// cannot come back leaves it as it is.
	settle, cancel := context.WithTimeout(ctx, m.Sim(m.DrainTimeout.Duration)+10*time.Second)
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

func (t *readyTracker) observeObj(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if p, ok := obj.(*v1.Pod); ok {
		t.observe(p, deleted)
	}
}

// upgrader plays a maintenance (surge upgrade, blue-green upgrade, consolidation) on one pool.
type upgrader struct {
	cs       kubernetes.Interface
	sc       *Scenario
	m        *Maintenance
	pool     *Pool
	rng      *rand.Rand
	progress func(string, ...any)

	mu                  sync.Mutex
	evictions, refusals map[string]int
	res                 *MaintenanceResult
}

// sleep waits d of AKS time.
func (u *upgrader) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return sleepUntil(ctx, time.Now().Add(u.m.Sim(d)))
}

// draw returns the pool's original nodes in the random (seeded) order the maintenance takes
// them, and the zones of newZones new nodes. The zones are drawn first, so both modes draw the
// same zones and order from the seed.
func (u *upgrader) draw(newZones int) (nodes []string, zones []int) {
	for i := 0; i < u.pool.Nodes; i++ {
		nodes = append(nodes, u.sc.nodeName(u.pool, i))
	}
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
	p := u.pool
	n := p.Nodes
	surge := min(u.m.MaxSurge.Of(n), n)
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
	u.progress("surge: %d new nodes (maxSurge %s of %d)", surge, u.m.MaxSurge, n)
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
					if errs[i] = u.sleep(ctx, u.m.NodeSoak.Duration); errs[i] == nil {
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
		if u.m.Undrainable == UndrainableSchedule {
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
		zones[i] = u.rng.Intn(max(u.pool.Zones, 1))
	}
	return zones
}

// addNodes waits provisionTime, then creates a node on the new image and kubelet per zone
// index (-1: the pool's round-robin zone), named with the scale set's next instance ids.
func (u *upgrader) addNodes(ctx context.Context, zones []int) ([]string, error) {
	if err := u.sleep(ctx, u.m.ProvisionTime.Duration); err != nil {
		return nil, err
	}
	p := u.pool
	var names []string
	for _, zone := range zones {
		node := u.sc.buildNode(p, p.Nodes+p.JoiningNodes+len(u.res.NewNodes), true)
		if p.Zones > 0 && zone >= 0 {
			node.Labels[ZoneKey] = zoneName(u.sc, zone)
		}
		setVersion(node, u.m.ToNodeImage, u.m.ToKubelet)
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
	p := u.pool
	n := p.Nodes
	batch := min(u.m.DrainBatchSize.Of(n), n)
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
			if err := u.sleep(ctx, u.m.BatchSoak.Duration); err != nil {
				return err
			}
		}
	}
	if err := u.sleep(ctx, u.m.FinalSoak.Duration); err != nil {
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
	p := u.pool
	n := p.Nodes
	budget := min(u.m.Budget.Of(n), n)
	old, zones := u.draw(n)
	disrupted := v1.Taint{Key: pool.TaintKarpenterDisrupted, Effect: v1.TaintEffectNoSchedule}
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
	deadline := time.Now().Add(u.m.Sim(u.m.DrainTimeout.Duration))
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
	err = wait.PollUntilContextCancel(dctx, u.m.Sim(evictionRetry)/5+10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
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
	if u.m.Reimage == ReimageRegistersAgain {
		return u.registerAgain(ctx, name)
	}
	if err := u.sleep(ctx, u.m.ReimageTime.Duration); err != nil {
		return err
	}
	if err := u.setReady(ctx, name, v1.ConditionTrue, u.m.ToKubelet); err != nil {
		return err
	}
	return u.updateNode(ctx, name, func(node *v1.Node) {
		node.Labels[pool.NodeImageVersionLabel] = u.m.ToNodeImage
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
	if err := u.sleep(ctx, u.m.ReimageTime.Duration); err != nil {
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
	setVersion(node, u.m.ToNodeImage, u.m.ToKubelet)
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

// zoneName is the zone label of a zonal pool's zone index (as buildNode writes it).
func zoneName(sc *Scenario, i int) string {
	region := "region"
	if sc.Azure != nil {
		region = sc.Azure.Region
	}
	return fmt.Sprintf("%s-%d", region, 1+i)
}

// setVersion labels the node with its image and sets its kubelet version.
func setVersion(node *v1.Node, image, kubelet string) {
	node.Labels[pool.NodeImageVersionLabel] = image
	node.Status.NodeInfo.KubeletVersion = kubelet
}

// nodeList names a few nodes, or counts many, for a progress line.
func nodeList(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%d nodes (%s, ...)", len(names), names[0])
}
