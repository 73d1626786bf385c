package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
	"github.com/pool-scheduler/pool-scheduler/pkg/spreadkeeper"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// spreadTrials is how many trials the workload-lifecycle tests run: a few in make test, more with
// POOL_SCHEDULER_SPREAD_TRIALS (docs/spread.md records the rates measured that way).
func spreadTrials(t *testing.T, short int) int {
	t.Helper()
	v := os.Getenv("POOL_SCHEDULER_SPREAD_TRIALS")
	if v == "" {
		return short
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("POOL_SCHEDULER_SPREAD_TRIALS=%q: want a positive number", v)
	}
	return n
}

// spreadCluster is the cluster: 3 zones x 3 update domains x 2 hosts, the shipped
// profile, the upstream ReplicaSet controller and a kubelet stand-in that makes bound pods
// Running and Ready.
func spreadCluster(t *testing.T) (*controlplane.ControlPlane, util.SpreadTopology) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	topo := util.CreateSpreadNodes(tCtx, t, cp.Client, 3, 3, 2)
	util.StartScheduler(t, cp, util.LoadShippedConfig(t).Profiles[0])
	util.StartReplicaSetController(t, cp)
	util.StartKubelet(t, cp.Client)
	return cp, topo
}

// removeWorkloads deletes the namespace's ReplicaSets and pods and waits until they are gone, so
// the next trial starts on empty nodes.
func removeWorkloads(tCtx ktesting.TContext, t *testing.T, cp *controlplane.ControlPlane, ns string) {
	t.Helper()
	cs := cp.Client
	if err := cs.AppsV1().ReplicaSets(ns).DeleteCollection(tCtx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(tCtx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods of %s still there after a minute", ns)
	}
}

// TestBurstSpread: the ReplicaSet controller creates 18 replicas in its slow-start batches
// (1, 2, 4, 8, 3: kube-controller-manager's slowStartBatch) on 3 zones x 3 update domains x 2
// hosts, one workload alone or three at once (their pods interleaved in the scheduling queue, as
// in a busy cluster). No host may hold two replicas of a workload while another host holds none
// (the doubled host: a zone/update-domain cell of 2 hosts given 3 replicas while another
// cell got 1), in any trial; zone and update-domain skew stay at 0.
func TestBurstSpread(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp, topo := spreadCluster(t)
	cs := cp.Client
	tests := []struct {
		name      string
		workloads int
	}{
		{name: "one workload", workloads: 1},
		{name: "three workloads at once", workloads: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trials := spreadTrials(t, 3)
			failed := 0
			for trial := range trials {
				ns := util.CreateNamespace(tCtx, t, cs, "burst")
				var names []string
				for w := range tt.workloads {
					name := fmt.Sprintf("web-%d", w)
					names = append(names, name)
					if _, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, util.ReplicaSet(ns, name, 18), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range names {
					placed := topo.SpreadOf(util.WaitForReplicas(tCtx, t, cs, ns, name, 18, 2*time.Minute))
					doubled := topo.DoubledHosts(placed)
					if len(doubled) > 0 || spread.Skew(placed.Zones) > 0 || spread.Skew(placed.UpdateDomains) > 0 {
						failed++
						t.Errorf("trial %d, %s: hosts doubled up while a host is empty: %v; %s", trial, name, doubled, placed)
					}
				}
				removeWorkloads(tCtx, t, cp, ns)
			}
			t.Logf("%d of %d bursts of 18 replicas left a host doubled up or a domain skewed", failed, trials*tt.workloads)
		})
	}
}

// TestScaleDownKeepsSpread: the acceptance. A ReplicaSet scaled 18 -> 9 -> 4 -> 12 by the
// upstream ReplicaSet controller over 3 zones x 3 update domains x 2 hosts, with the
// deletion-cost keeper running: after every scale-down the zone and update-domain skew is at
// most 1 in at least 95% of trials (in every trial of the few make test runs), and the scale-up
// leaves no host doubled beside an empty one. The keeper's writes per scale event are logged, and
// its corrections per created replica are at most 0.05.
// POOL_SCHEDULER_SPREAD_BASELINE=1 runs without the keeper and only reports the rate.
func TestScaleDownKeepsSpread(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp, topo := spreadCluster(t)
	cs := cp.Client
	baseline := os.Getenv("POOL_SCHEDULER_SPREAD_BASELINE") == "1"
	var keeper *spreadkeeper.Keeper
	if !baseline {
		keeper = util.StartDeletionCostKeeper(t, cp)
	}
	settle := func(ns string) {
		if keeper != nil {
			util.WaitForDeletionCosts(tCtx, t, cs, keeper, ns, "web", time.Minute)
		}
	}
	patches := func() int64 {
		if keeper == nil {
			return 0
		}
		return keeper.Patches()
	}
	trials := spreadTrials(t, 3)
	steps := []int32{18, 9, 4, 12}
	failedTrials := 0
	writes := make([]int64, len(steps))
	for trial := range trials {
		ns := util.CreateNamespace(tCtx, t, cs, "scale")
		before := patches()
		if _, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, util.ReplicaSet(ns, "web", steps[0]), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		failed := false
		for i, replicas := range steps {
			if i > 0 {
				util.ScaleReplicaSet(tCtx, t, cs, ns, "web", replicas)
			}
			placed := topo.SpreadOf(util.WaitForReplicas(tCtx, t, cs, ns, "web", int(replicas), 2*time.Minute))
			settle(ns)
			writes[i] += patches() - before
			before = patches()
			zoneSkew, udSkew := spread.Skew(placed.Zones), spread.Skew(placed.UpdateDomains)
			scaledDown := i > 0 && replicas < steps[i-1]
			if scaledDown && (zoneSkew > 1 || udSkew > 1) {
				failed = true
				t.Logf("trial %d, %d -> %d replicas: zone skew %d, update-domain skew %d; %s", trial, steps[i-1], replicas, zoneSkew, udSkew, placed)
			}
			if doubled := topo.DoubledHosts(placed); !scaledDown && len(doubled) > 0 {
				t.Errorf("trial %d, scaled to %d: hosts doubled up while a host is empty: %v; %s", trial, replicas, doubled, placed)
			}
		}
		if failed {
			failedTrials++
		}
		removeWorkloads(tCtx, t, cp, ns)
	}
	for i, replicas := range steps {
		from := "created"
		if i > 0 {
			from = "from " + strconv.Itoa(int(steps[i-1]))
		}
		t.Logf("deletion-cost writes, scale to %d (%s): %.1f per event", replicas, from, float64(writes[i])/float64(trials))
	}
	t.Logf("%d of %d trials had a zone or update-domain skew above 1 after a scale-down (keeper running: %v)", failedTrials, trials, keeper != nil)
	// DomainSpread's bindings carry each new replica's deletion cost, in placement order: the
	// keeper corrects only what changed otherwise, which nothing does here (#47's goal: at most
	// 0.05 corrections per created replica).
	created, total := steps[0], int64(0)
	for i := range steps {
		if i > 0 && steps[i] > steps[i-1] {
			created += steps[i] - steps[i-1]
		}
		total += writes[i]
	}
	perReplica := float64(total) / float64(int(created)*trials)
	t.Logf("the keeper's corrections: %.3f per created replica", perReplica)
	if !baseline && perReplica > 0.05 {
		t.Errorf("the keeper corrected %.3f deletion costs per created replica, want at most 0.05", perReplica)
	}
	if !baseline && float64(failedTrials) > 0.05*float64(trials) {
		t.Errorf("%d of %d trials lost the spread in a scale-down, want at most 5%%", failedTrials, trials)
	}
}

// TestRebalancer: a ReplicaSet whose 6 replicas all landed in one zone (the others were cordoned,
// as when a zone is lost and replaced). The rebalancer's dry run reports a replica to move and
// evicts nothing; with a PodDisruptionBudget allowing no disruption (the upstream disruption
// controller computes it) the eviction is refused and every replica stays; once the budget
// allows one, replicas are evicted one at a time, each replacement placed by DomainSpread, until
// the zone and update-domain skew are at most 1.
func TestRebalancer(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp, topo := spreadCluster(t)
	cs := cp.Client
	util.StartDisruptionController(t, cp)
	keeper := util.StartDeletionCostKeeper(t, cp)
	ns := util.CreateNamespace(tCtx, t, cs, "drift")

	pods, uncordon := replicasInZone0(tCtx, t, cs, topo, ns, "web", 6)
	uncordon()
	uids := func(pods []v1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, string(p.UID))
		}
		sort.Strings(out)
		return out
	}
	before := uids(pods)

	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(6)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(tCtx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	} else {
		waitBudget(tCtx, t, cp, pdb, 0)
	}

	// A pass that decides: the keeper's informers may lag the uncordoning by a moment.
	pass := func(r *spreadkeeper.Rebalancer) []spreadkeeper.Decision {
		t.Helper()
		var got []spreadkeeper.Decision
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got = r.Pass(ctx)
			return len(got) > 0, nil
		})
		if err != nil {
			t.Fatal("no rebalancing decision within a minute")
		}
		return got
	}
	results := func(ds []spreadkeeper.Decision) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Dimension+": "+d.Result)
		}
		return out
	}
	newRebalancer := func(dryRun bool) *spreadkeeper.Rebalancer { return startRebalancer(tCtx, t, keeper, dryRun) }

	t.Run("dry run", func(t *testing.T) {
		if diff := cmp.Diff([]string{"zone: dry_run"}, results(pass(newRebalancer(true)))); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, uids(util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, time.Minute))); diff != "" {
			t.Errorf("replicas changed in a dry run (-before +after):\n%s", diff)
		}
	})
	evicting := newRebalancer(false)
	t.Run("refused by a PodDisruptionBudget", func(t *testing.T) {
		got := pass(evicting)
		if diff := cmp.Diff([]string{"zone: refused"}, results(got)); diff != "" {
			t.Fatalf("decisions (-want +got):\n%s", diff)
		}
		if !apierrors.IsTooManyRequests(got[0].Err) {
			t.Errorf("refused with %v, want 429 Too Many Requests (the budget)", got[0].Err)
		}
		if diff := cmp.Diff(before, uids(util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, time.Minute))); diff != "" {
			t.Errorf("replicas changed though the budget allows no disruption (-before +after):\n%s", diff)
		}
	})
	t.Run("evicted one at a time", func(t *testing.T) {
		pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Patch(tCtx, "web", "application/merge-patch+json",
			[]byte(`{"spec":{"minAvailable":null,"maxUnavailable":1}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitBudget(tCtx, t, cp, pdb, 1)
		placed := topo.SpreadOf(pods)
		moves := 0
		for spread.Skew(placed.Zones) > 1 || spread.Skew(placed.UpdateDomains) > 1 {
			if moves++; moves > 6 {
				t.Fatalf("still skewed after 6 evictions: %s", placed)
			}
			got := pass(evicting)
			if diff := cmp.Diff([]string{"zone: evicted"}, results(got)); diff != "" && !slices.Equal(results(got), []string{"update-domain: evicted"}) {
				t.Fatalf("move %d: decisions (-want +got):\n%s", moves, diff)
			}
			placed = topo.SpreadOf(util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, 2*time.Minute))
			waitBudget(tCtx, t, cp, pdb, 1)
		}
		t.Logf("%d evictions: %s", moves, placed)
	})
}

// startRebalancer starts a rebalancer on the keeper's informers with the flags' caps (no
// passes of its own: the test calls Pass) and waits until its informers synced.
func startRebalancer(tCtx ktesting.TContext, t *testing.T, keeper *spreadkeeper.Keeper, dryRun bool) *spreadkeeper.Rebalancer {
	t.Helper()
	// No cooldown: the test's passes follow each other (a backoff still lasts Interval at least).
	r, err := spreadkeeper.NewRebalancer(keeper, spreadkeeper.RebalanceOptions{DryRun: dryRun, Interval: time.Hour, Cooldown: 0,
		MaxBackoff: time.Hour, MaxSkew: 1, MaxPerPass: 5, MaxPerNode: 1, MaxPerNamespace: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(tCtx)
	t.Cleanup(cancel)
	if !r.Start(ctx) {
		t.Fatal("the rebalancer's informers did not sync")
	}
	return r
}

// TestRebalancerFitAndBackoff: a ReplicaSet whose 6 replicas all sit in zone-0 while the nodes
// of zone-1 and zone-2 (its only other domains) carry a NoSchedule taint the pods do not
// tolerate, then have their allocatable CPU exhausted: the rebalancer evicts nothing (a
// replacement would land back in zone-0, and the loop would repeat every cooldown), reports
// no_fit and backs off (the next pass leaves the workload alone). Positive control: once zone-1
// has room again, the same workload gets one eviction and its replacement lands in zone-1.
func TestRebalancerFitAndBackoff(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp, topo := spreadCluster(t)
	cs := cp.Client
	keeper := util.StartDeletionCostKeeper(t, cp)
	ns := util.CreateNamespace(tCtx, t, cs, "nofit")
	others := func(patch func(node string)) {
		for node, cell := range topo {
			if cell.Zone != "zone-0" {
				patch(node)
			}
		}
	}
	others(func(node string) { util.PatchNode(tCtx, t, cs, node, `{"spec":{"unschedulable":true}}`) })
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, util.ReplicaSet(ns, "web", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, 2*time.Minute)
	if s := topo.SpreadOf(pods); spread.Skew(s.Zones) != 6 {
		t.Fatalf("want every replica in zone-0 to start from: %s", s)
	}
	uids := func(pods []v1.Pod) map[types.UID]string {
		out := map[types.UID]string{}
		for _, p := range pods {
			out[p.UID] = topo[p.Spec.NodeName].Zone
		}
		return out
	}
	before := uids(pods)
	// Uncordoned and tainted in one write: the informers never see zone-1 or zone-2 open.
	others(func(node string) {
		util.PatchNode(tCtx, t, cs, node, `{"spec":{"unschedulable":false,"taints":[{"key":"dedicated","value":"batch","effect":"NoSchedule"}]}}`)
	})
	// A pass that decides: the informers may lag the uncordoning by a moment.
	pass := func(r *spreadkeeper.Rebalancer) []spreadkeeper.Decision {
		t.Helper()
		var got []spreadkeeper.Decision
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got = r.Pass(ctx)
			return len(got) > 0, nil
		})
		if err != nil {
			t.Fatal("no rebalancing decision within a minute")
		}
		return got
	}
	noFit := func(t *testing.T) {
		r := startRebalancer(tCtx, t, keeper, false)
		got := pass(r)
		if len(got) != 1 || got[0].Result != "skipped" || got[0].Reason != spreadkeeper.SkipNoFit || got[0].Backoff <= 0 {
			t.Fatalf("decisions %+v, want one skipped for %s with a backoff", got, spreadkeeper.SkipNoFit)
		}
		t.Logf("%+v", got[0])
		if again := r.Pass(tCtx); len(again) != 0 {
			t.Errorf("the pass after: decisions %+v, want none (backing off)", again)
		}
		if diff := cmp.Diff(before, uids(util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, time.Minute))); diff != "" {
			t.Errorf("replicas changed (-before +after):\n%s", diff)
		}
	}
	t.Run("tainted domains", noFit)
	// Full before untainted, in that order: the informer sees every node full before any open.
	others(func(node string) {
		if _, err := cs.CoreV1().Nodes().PatchStatus(tCtx, node, []byte(`{"status":{"allocatable":{"cpu":"50m"}}}`)); err != nil {
			t.Fatal(err)
		}
	})
	others(func(node string) { util.PatchNode(tCtx, t, cs, node, `{"spec":{"taints":null}}`) })
	t.Run("full domains", noFit)

	t.Run("positive control: room in zone-1", func(t *testing.T) {
		others(func(node string) {
			if topo[node].Zone == "zone-1" {
				if _, err := cs.CoreV1().Nodes().PatchStatus(tCtx, node, []byte(`{"status":{"allocatable":{"cpu":"8"}}}`)); err != nil {
					t.Fatal(err)
				}
			}
		})
		// A fresh rebalancer each time until its informers show the room (a pass that sees
		// none yet backs off, as it should).
		var got []spreadkeeper.Decision
		err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got = pass(startRebalancer(tCtx, t, keeper, false))
			return got[0].Result == "evicted", nil
		})
		if err != nil {
			t.Fatalf("no eviction within a minute with room in zone-1: last decisions %+v", got)
		}
		after := uids(util.WaitForReplicas(tCtx, t, cs, ns, "web", 6, time.Minute))
		var gone, added []string
		for uid := range before {
			if _, ok := after[uid]; !ok {
				gone = append(gone, string(uid))
			}
		}
		for uid, zone := range after {
			if _, ok := before[uid]; !ok {
				added = append(added, zone)
			}
		}
		if len(gone) != 1 || !slices.Equal(added, []string{"zone-1"}) {
			t.Errorf("after the eviction: %d replicas gone, new ones in %v; want one gone and its replacement in zone-1", len(gone), added)
		}
	})
}

// waitBudget waits until the disruption controller has observed the budget and allows want
// disruptions.
func waitBudget(tCtx ktesting.TContext, t *testing.T, cp *controlplane.ControlPlane, pdb *policyv1.PodDisruptionBudget, want int32) {
	t.Helper()
	err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Get(ctx, pdb.Name, metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration >= pdb.Generation && got.Status.DisruptionsAllowed == want, nil
	})
	if err != nil {
		t.Fatalf("PodDisruptionBudget %s/%s does not allow %d disruptions within a minute", pdb.Namespace, pdb.Name, want)
	}
}

// replicasInZone0 creates a ReplicaSet of n replicas with every zone but zone-0 cordoned, so that
// all of them start in zone-0 (skew n), and returns its pods and the function that uncordons the
// other zones again.
func replicasInZone0(tCtx ktesting.TContext, t *testing.T, cs kubernetes.Interface, topo util.SpreadTopology, ns, name string, n int32) ([]v1.Pod, func()) {
	t.Helper()
	cordon := func(on bool) {
		for node, cell := range topo {
			if cell.Zone != "zone-0" {
				util.PatchNode(tCtx, t, cs, node, fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on))
			}
		}
	}
	cordon(true)
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, util.ReplicaSet(ns, name, n), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := util.WaitForReplicas(tCtx, t, cs, ns, name, int(n), 2*time.Minute)
	if s := topo.SpreadOf(pods); spread.Skew(s.Zones) != int(n) {
		t.Fatalf("want every replica in zone-0 to start from: %s", s)
	}
	return pods, func() { cordon(false) }
}
