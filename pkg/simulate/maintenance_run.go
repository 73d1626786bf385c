package simulate

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/kubesim"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper/floor"
)

// maintenanceWorkloads creates the workloads as ReplicaSets (and their PodDisruptionBudgets)
// for the ReplicaSet controller to fill, and returns the ReplicaSets for aksemu's record.
// floorStopped delivers the budget floor's end (nil: no floor runs).
func maintenanceWorkloads(ctx context.Context, cs kubernetes.Interface, sc *Scenario, schedulerName func(*Workload) string, floorStopped <-chan error) ([]aksemu.Workload, error) {
	var recorded []aksemu.Workload
	floored := 0
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		if sc.Maintenance.BudgetFloor {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, floor.NamespaceLabel)
			if _, err := cs.CoreV1().Namespaces().Patch(ctx, w.Namespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return nil, fmt.Errorf("opting namespace %s in to the budget floor: %w", w.Namespace, err)
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
					return nil, fmt.Errorf("creating Deployment %s/%s: %w", rs.Namespace, rs.Name, err)
				}
				rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
				if w.PDB == nil && w.Replicas >= floor.MinReplicas {
					floored++
				}
			}
			if _, err := cs.AppsV1().ReplicaSets(w.Namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("creating ReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
			}
			budgeted := w.PDB != nil || sc.Maintenance.BudgetFloor && w.Replicas >= floor.MinReplicas
			recorded = append(recorded, aksemu.Workload{Name: w.Namespace + "/replicaset/" + rs.Name, Replicas: w.Replicas, PDB: budgeted})
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
				return nil, fmt.Errorf("creating PodDisruptionBudget %s/%s: %w", pdb.Namespace, pdb.Name, err)
			}
		}
	}
	if floored == 0 {
		return recorded, nil
	}
	return recorded, waitForFloor(ctx, cs, floored, floorStopped)
}

// waitForFloor waits until the floor keeps its budgets, floored of them, so they exist before
// the maintenance starts, as they would in a cluster where it ran before the upgrade; a floor
// that stops first (its manager failed to start) is an error of its own, not a minute's timeout.
func waitForFloor(ctx context.Context, cs kubernetes.Interface, floored int, stopped <-chan error) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-stopped:
			return false, fmt.Errorf("the budget floor stopped before it made its budgets: %v", err)
		default:
		}
		l, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: floor.ManagedByLabel + "=" + floor.ManagedBy})
		return err == nil && len(l.Items) == floored, nil
	})
}

var setControllerRuntimeLogger sync.Once

// startBudgetFloor runs the budget floor controller in process, as pool-labeler spread
// --budget-floor runs it (its cache options, no leader election), until ctx ends; the channel
// delivers its manager's end (an error if it failed). Runs in parallel share the process: the
// controller's name is not unique in it.
func startBudgetFloor(ctx context.Context, cp *controlplane.ControlPlane) (<-chan error, error) {
	// controller-runtime's own logger (its informers log through it) goes to klog too, as the
	// manager's; unset, it warns on stderr.
	setControllerRuntimeLogger.Do(func() { ctrllog.SetLogger(klog.Background()) })
	opts := ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: klog.Background(),
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}}
	floor.CacheOptions(&opts)
	mgr, err := ctrl.NewManager(cp.Config, opts)
	if err != nil {
		return nil, err
	}
	if err := floor.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	return stopped, nil
}

// runMaintenance starts the controllers and the kubelet stand-in, creates the workloads and
// has pkg/aksemu play the maintenance on them: it waits until they are Ready, plays the
// operation and waits until they are Ready again.
func runMaintenance(ctx context.Context, cp *controlplane.ControlPlane, sc *Scenario, schedulerName func(*Workload) string, progress func(string, ...any), observe func(context.Context, Stage) error) (*aksemu.Result, error) {
	m := sc.Maintenance
	cs := cp.Client
	kubesim.StartReplicaSetController(ctx, cp)
	if err := kubesim.StartDisruptionController(ctx, cp); err != nil {
		return nil, err
	}
	var floorStopped <-chan error
	if m.BudgetFloor {
		var err error
		if floorStopped, err = startBudgetFloor(ctx, cp); err != nil {
			return nil, fmt.Errorf("budget floor: %w", err)
		}
	}
	if err := kubesim.StartKubelet(ctx, cs, kubesim.KubeletOptions{ReadyAfter: m.Sim(m.PodReadyAfter.Duration), Logf: func(string, ...any) {}}); err != nil {
		return nil, err
	}
	workloads, err := maintenanceWorkloads(ctx, cs, sc, schedulerName, floorStopped)
	if err != nil {
		return nil, err
	}
	res, err := aksemu.Run(ctx, cs, sc.upgradePlan(workloads, progress, func(ctx context.Context) error { return observe(ctx, StageMaintenanceStart) }))
	if err != nil {
		return res, err
	}
	// A floor that stopped during the maintenance kept no budgets for part of it: its figures
	// would say less than they seem to.
	select {
	case err := <-floorStopped:
		if ctx.Err() == nil {
			return res, fmt.Errorf("the budget floor stopped during the maintenance: %v", err)
		}
	default:
	}
	return res, nil
}

// upgradePlan is the scenario's maintenance as pkg/aksemu plays it, AKS's defaults applied.
func (sc *Scenario) upgradePlan(workloads []aksemu.Workload, progress func(string, ...any), start func(context.Context) error) *aksemu.UpgradePlan {
	m := sc.Maintenance
	var p *Pool
	for i := range sc.Pools {
		if sc.Pools[i].Name == m.Pool {
			p = &sc.Pools[i]
		}
	}
	plan := &aksemu.UpgradePlan{Kind: m.Kind, Zones: p.Zones,
		QuarantineUndrainable: m.Undrainable == UndrainableCordon, KeepNodeOnReimage: m.Reimage == ReimageKeepsNode,
		DrainTimeout: m.DrainTimeout.Duration, NodeSoak: m.NodeSoak.Duration, ReimageTime: m.ReimageTime.Duration, ProvisionTime: m.ProvisionTime.Duration,
		Seed: m.Seed, TimeScale: m.TimeScale, ToNodeImage: m.ToNodeImage, ToKubelet: m.ToKubelet, Workloads: workloads, Progress: progress, Start: start,
		NewNode: func(i, zone int) *v1.Node {
			node := sc.buildNode(p, p.Nodes+p.JoiningNodes+i, true)
			if p.Zones > 0 && zone >= 0 {
				node.Labels[ZoneKey] = zoneName(sc, zone)
			}
			return node
		}}
	for i := 0; i < p.Nodes; i++ {
		plan.Nodes = append(plan.Nodes, sc.nodeName(p, i))
	}
	n := p.Nodes
	if m.MaxSurge != nil {
		plan.MaxSurge, plan.MaxSurgeSetting = m.MaxSurge.Of(n), m.MaxSurge.String()
	}
	if m.DrainBatchSize != nil {
		plan.DrainBatchSize = m.DrainBatchSize.Of(n)
	}
	if m.BatchSoak != nil {
		plan.BatchSoak = m.BatchSoak.Duration
	}
	if m.FinalSoak != nil {
		plan.FinalSoak = m.FinalSoak.Duration
	}
	if m.Budget != nil {
		plan.Budget = m.Budget.Of(n)
	}
	return plan
}
