package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubernetes/test/utils/ktesting"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestLabelerHA runs three bin/pool-labeler controller replicas (leader election on the Lease
// pool-scheduler/pool-labeler, with a 6s lease, 5s renew deadline and 1s retry set by flags) while NodePoolLabelSets change, nodes join
// and nodes move between pools, SIGKILLs the leader twice (a replacement starts after each kill)
// and checks that a standby takes over each time (takeover times are logged) and that in the end
// every node carries exactly its pool's desired labels, no stale ones, with a managed-labels
// annotation naming exactly the desired keys.
func TestLabelerHA(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const ns = "pool-scheduler"
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pools := []string{"a", "b", "c"}
	applySet := func(name string, labels map[string]string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			return util.ApplyLabelSet(tCtx, cp, util.LabelSet(ns, name, labels))
		})
	}
	if err := applySet("a", map[string]string{"example.com/team": "a", "example.com/gen": "0"}); err != nil {
		t.Fatal(err)
	}
	if err := applySet("b", map[string]string{"example.com/k0": "b"}); err != nil {
		t.Fatal(err)
	}
	nodes := 0
	addNode := func(p string) error {
		name := fmt.Sprintf("n-%02d", nodes)
		nodes++
		_, err := cs.CoreV1().Nodes().Create(tCtx, util.Node(name, map[string]string{poolKey: p}).Obj(), metav1.CreateOptions{})
		return err
	}
	for i := 0; i < 6; i++ {
		if err := addNode(pools[i%3]); err != nil {
			t.Fatal(err)
		}
	}
	writes := watchManagedAnnotation(tCtx, t, cp)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	start := func() *util.SchedulerProcess {
		return util.StartProcess(t, util.LabelerBinary(t), "controller", "--kubeconfig="+kubeconfig, "--namespaces="+ns,
			"--leader-elect-namespace="+ns, "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2",
			// Shorter than the 15s/10s/2s defaults, so the takeovers take seconds, not ~17 s each.
			"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=5s", "--leader-elect-retry-period=1s")
	}
	replicas := &util.Replicas{Client: cs, LeaseNamespace: ns, LeaseName: "pool-labeler", Start: start, FirstWorkAfter: writes.firstAfter}
	replicas.StartReplicas(tCtx, t, 3)

	// Change sets and nodes every 250 ms until the kills are done, from one goroutine, so the
	// sequence of changes is always the same.
	mutateCtx, stopMutating := context.WithCancel(tCtx)
	var mutations sync.WaitGroup
	var mutateErr error
	var mutated atomic.Int32 // mutations done
	// afterMutations waits until n more mutations were made: the leader has had work to do.
	afterMutations := func(n int32) {
		t.Helper()
		target := mutated.Load() + n
		if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			return mutated.Load() >= target, nil
		}); err != nil {
			t.Fatalf("%d mutations not made within 60s (%d done; the mutation error is reported at the end)", n, mutated.Load())
		}
	}
	mutations.Add(1)
	go func() {
		defer mutations.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		cExists := false
		for i := 1; ; i++ {
			select {
			case <-mutateCtx.Done():
				return
			case <-tick.C:
			}
			var err error
			switch i % 6 {
			case 0:
				err = applySet("a", map[string]string{"example.com/team": "a", "example.com/gen": fmt.Sprint(i)})
			case 1:
				err = addNode(pools[i%3])
			case 2:
				err = applySet("b", map[string]string{fmt.Sprintf("example.com/k%d", i%3): "b", "example.com/gen": fmt.Sprint(i)})
			case 3:
				// Move an earlier node to the next pool.
				name := fmt.Sprintf("n-%02d", i%nodes)
				_, err = cs.CoreV1().Nodes().Patch(tCtx, name, "application/merge-patch+json",
					[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, poolKey, pools[(i/6)%3])), metav1.PatchOptions{})
			case 4:
				if cExists {
					err = cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).Delete(tCtx, "c", metav1.DeleteOptions{})
				} else {
					err = applySet("c", map[string]string{"example.com/team": "c", "example.com/gen": fmt.Sprint(i)})
				}
				cExists = !cExists
			case 5:
				err = applySet("a", map[string]string{"example.com/gen": fmt.Sprint(i)})
			}
			if err != nil && mutateCtx.Err() == nil {
				mutateErr = fmt.Errorf("mutation %d: %w", i, err)
				return
			}
			mutated.Add(1)
		}
	}()

	var takeovers []string
	for k := 1; k <= 2; k++ {
		leader, err := replicas.Leader(tCtx, 60*time.Second, func() bool { return true })
		if err != nil {
			t.Fatalf("kill %d: no live leader: %v", k, err)
		}
		// Let the leader work: one round of every kind of change.
		afterMutations(6)
		took, err := replicas.KillLeader(tCtx, t, leader, 30*time.Second)
		if err != nil {
			t.Fatalf("kill %d: no node labels written: %v", k, err)
		}
		msg := fmt.Sprintf("kill %d: new holder %s after %v, first label write after %v",
			k, took.Holder, took.Lease.Round(time.Millisecond), took.FirstWork.Round(time.Millisecond))
		t.Log(msg)
		takeovers = append(takeovers, msg)
	}
	// One more round of changes for the last leader, then stop.
	afterMutations(6)
	stopMutating()
	mutations.Wait()
	if mutateErr != nil {
		t.Fatal(mutateErr)
	}

	var problems []string
	err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		problems = labelProblems(ctx, t, cp, ns)
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Fatalf("nodes not labelled as their pools want within 60s:\n  %s", strings.Join(problems, "\n  "))
	}
	for i, p := range replicas.Procs {
		if !slices.Contains(replicas.Killed, p) && p.Exited() {
			t.Errorf("replica %d exited without being killed: %s", i, p.Output())
		}
	}
	t.Logf("%d nodes labelled correctly after %d leader kills; takeovers (lease 6s/5s/1s):\n  %s", nodes, len(replicas.Killed), strings.Join(takeovers, "\n  "))
}

// labelProblems compares every node with its pool's NodePoolLabelSet. Nodes are created with
// only the pool and hostname labels, so every other label must be a desired one.
func labelProblems(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string) []string {
	sets, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	desired := map[string]map[string]string{}
	for _, u := range sets.Items {
		set := &labelsv1alpha1.NodePoolLabelSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, set); err != nil {
			t.Fatal(err)
		}
		if set.DeletionTimestamp != nil {
			continue
		}
		want := map[string]string{}
		for k, v := range set.Spec.Labels {
			want[k] = string(v)
		}
		desired[set.Name] = want
	}
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, n := range nodes.Items {
		want := desired[n.Labels[poolKey]]
		for k, v := range want {
			if got, ok := n.Labels[k]; !ok || got != v {
				problems = append(problems, fmt.Sprintf("%s (pool %s): %s=%q, want %q", n.Name, n.Labels[poolKey], k, got, v))
			}
		}
		for k, v := range n.Labels {
			if _, ok := want[k]; !ok && k != poolKey && k != v1.LabelHostname {
				problems = append(problems, fmt.Sprintf("%s (pool %s): stale label %s=%s", n.Name, n.Labels[poolKey], k, v))
			}
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		got, has := n.Annotations[pool.ManagedLabelsAnnotation]
		if wantAnn := pool.FormatManagedLabels(keys); got != wantAnn && (has || len(keys) > 0) {
			problems = append(problems, fmt.Sprintf("%s (pool %s): managed-labels %q, want %q", n.Name, n.Labels[poolKey], got, wantAnn))
		}
	}
	return problems
}

// watchManagedAnnotation records when the labeler changes a node: its managed-labels annotation
// or a label other than the pool label (nodes are created with only pool and hostname labels).
func watchManagedAnnotation(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) *bindingLog {
	t.Helper()
	b := &bindingLog{at: map[string]time.Time{}, node: map[string]string{}}
	// The labeler's part of a node: its annotation and every label but the pool's (which only
	// the test changes).
	labelerPart := func(n *v1.Node) string {
		keys := make([]string, 0, len(n.Labels))
		for k, v := range n.Labels {
			if k != poolKey {
				keys = append(keys, k+"="+v)
			}
		}
		sort.Strings(keys)
		return n.Annotations[pool.ManagedLabelsAnnotation] + " " + strings.Join(keys, ",")
	}
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || labelerPart(o) == labelerPart(n) {
				return
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			// Keyed by write, not by node: firstAfter looks for any write after a time.
			b.at[n.Name+"@"+n.ResourceVersion] = time.Now()
		},
	}); err != nil {
		t.Fatal(err)
	}
	startInformers(ctx, t, factory)
	return b
}
