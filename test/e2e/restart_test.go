package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestSchedulerSurvivesControlPlaneRestart stops kube-apiserver and SIGKILLs etcd while pods are
// being created and scheduled, starts both again (same data, same address behind a forwarder,
// same serving certificate and token: see util.RestartableControlPlane) and checks that
// bin/pool-scheduler (shipped config, leader election on) keeps running, reconnects, keeps its
// Lease and binds every pod, including those created after the restart.
//
// The test's config lengthens the renew deadline (30s; shipped: the kube-scheduler default 10s):
// kube-scheduler exits by design when it cannot renew its Lease within the renew deadline (its
// Deployment restarts it), and an apiserver + etcd restart here can take longer than 10 s on a
// loaded machine. The test is about reconnecting, not about that exit.
func TestSchedulerSurvivesControlPlaneRestart(t *testing.T) {
	tCtx := ktesting.Init(t)
	r := util.StartRestartableControlPlane(t)
	cs := r.Client
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.MustApplyLabelSet(tCtx, t, r.APIServer, util.LabelSet("pool-scheduler", "spot", map[string]string{"example.com/tier": "gold"}))
	for i := 0; i < 10; i++ {
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("spot-%d", i), map[string]string{poolKey: "spot", "example.com/tier": "gold"}).Obj())
	}
	util.CreateNode(tCtx, t, cs, util.Node("spot-unlabelled", map[string]string{poolKey: "spot"}).Obj())
	ns := util.CreateNamespace(tCtx, t, cs, "restart")

	doc := util.ShippedConfigFor(t, r.APIServer)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(r.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	doc["clientConnection"].(map[string]any)["kubeconfig"] = kubeconfig
	le := doc["leaderElection"].(map[string]any)
	le["leaseDuration"], le["renewDeadline"], le["retryPeriod"] = "40s", "30s", "2s"
	proc := util.StartSchedulerBinary(t, doc)
	holder, _ := util.WaitForLeaseHolder(tCtx, t, cs, "pool-scheduler", "pool-scheduler", "", 60*time.Second)

	// Create pods at a steady pace; a create that fails while the control plane is down is
	// retried (AlreadyExists: the first attempt got through).
	const pods = 600
	var createdCount atomic.Int32
	created := make(chan error, 1)
	go func() {
		for i := 0; i < pods; i++ {
			p := util.Pod(ns, fmt.Sprintf("p-%03d", i)).Obj()
			err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				return err == nil || apierrors.IsAlreadyExists(err), nil
			})
			if err != nil {
				created <- fmt.Errorf("creating pod %s: %w", p.Name, err)
				return
			}
			createdCount.Add(1)
			time.Sleep(15 * time.Millisecond)
		}
		created <- nil
	}()

	bound := func() int {
		list, err := cs.CoreV1().Pods(ns).List(tCtx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		n := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n
	}
	if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return bound() >= 150, nil
	}); err != nil {
		t.Fatalf("150 pods not bound within 60s before the restart (bound: %d)", bound())
	}

	down := time.Now()
	t.Logf("restarting the control plane: %d pods created, %d bound", createdCount.Load(), bound())
	errorsBefore := r.ClientErrors(proc)
	r.StopAPIServer()
	r.Etcd.Kill()
	// Keep it down until the scheduler's clients have noticed (logged a failed request).
	r.WaitForClientErrors(tCtx, t, proc, errorsBefore, 1)
	r.Etcd.Start()
	r.StartAPIServer()
	outage := time.Since(down)
	createdAtRestart := createdCount.Load()
	t.Logf("control plane back after %v; %d pods created so far", outage.Round(time.Millisecond), createdAtRestart)
	if createdAtRestart >= pods {
		t.Fatalf("all pods were created before the restart; the test needs some created after it")
	}

	select {
	case err := <-created:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("pods not created within 3 minutes")
	}
	start := time.Now()
	list := util.WaitAllBound(tCtx, t, cs, ns, pods, 2*time.Minute)
	for _, p := range list {
		if p.Spec.NodeName == "spot-unlabelled" {
			t.Errorf("pod %s bound to the unlabelled node", p.Name)
		}
	}
	if exited, err := proc.Wait(0); exited {
		t.Fatalf("scheduler exited: %v", err)
	}
	if h := util.LeaseHolder(tCtx, cs, "pool-scheduler", "pool-scheduler"); h != holder {
		t.Errorf("Lease holder %q after the restart, want %q (the scheduler lost its Lease)", h, holder)
	}
	t.Logf("all %d pods bound (%d created after the restart), the last %v after creation ended; scheduler still running and leading",
		pods, pods-int(createdAtRestart), time.Since(start).Round(time.Millisecond))
}

// TestLabelerSurvivesControlPlaneRestart: bin/pool-labeler (controller, leader election on) keeps
// running through a kube-apiserver stop and etcd SIGKILL, reconnects, keeps its Lease, and
// applies set and node changes made after the restart. Renew deadline lengthened as above.
func TestLabelerSurvivesControlPlaneRestart(t *testing.T) {
	tCtx := ktesting.Init(t)
	r := util.StartRestartableControlPlane(t)
	cs := r.Client
	const ns = "pool-scheduler"
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.MustApplyLabelSet(tCtx, t, r.APIServer, util.LabelSet(ns, "spot", map[string]string{"example.com/tier": "gold"}))
	util.CreateNode(tCtx, t, cs, util.Node("spot-0", map[string]string{poolKey: "spot"}).Obj())

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(r.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	proc := util.StartProcess(t, util.LabelerBinary(t), "controller", "--kubeconfig="+kubeconfig, "--namespaces="+ns,
		"--leader-elect-namespace="+ns, "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2",
		"--leader-elect-lease-duration=40s", "--leader-elect-renew-deadline=30s", "--leader-elect-retry-period=2s")
	holder, _ := util.WaitForLeaseHolder(tCtx, t, cs, ns, "pool-labeler", "", 60*time.Second)
	labelled := func(want map[string]string, nodes ...string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, name := range nodes {
				n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				for k, v := range want {
					if n.Labels[k] != v {
						return false, nil
					}
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("nodes %v not labelled %v: %v", nodes, want, err)
		}
	}
	labelled(map[string]string{"example.com/tier": "gold"}, "spot-0")

	errorsBefore := r.ClientErrors(proc)
	r.StopAPIServer()
	r.Etcd.Kill()
	r.WaitForClientErrors(tCtx, t, proc, errorsBefore, 1)
	r.Etcd.Start()
	r.StartAPIServer()

	// Changes after the restart reach the labeler through its re-established watches.
	util.MustApplyLabelSet(tCtx, t, r.APIServer, util.LabelSet(ns, "spot", map[string]string{"example.com/tier": "gold", "example.com/team": "data"}))
	util.CreateNode(tCtx, t, cs, util.Node("spot-1", map[string]string{poolKey: "spot"}).Obj())
	labelled(map[string]string{"example.com/tier": "gold", "example.com/team": "data"}, "spot-0", "spot-1")
	if proc.Exited() {
		t.Fatalf("labeler exited: %s", proc.Output())
	}
	if h := util.LeaseHolder(tCtx, cs, ns, "pool-labeler"); h != holder {
		t.Errorf("Lease holder %q after the restart, want %q (the labeler lost its Lease)", h, holder)
	}
}
