package integration

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestLabelerStopsCleanly stops the labeler again and again while its work queues are busy (each
// start queues 120 pool nodes, relabelled all the time) and fails if a stopped labeler leaves a
// work-queue goroutine behind. controller-runtime's priority queue (on by default from v0.23, the 1.36
// line's v0.24.1) deadlocks on shutdown in this situation (kubernetes-sigs/controller-runtime
// #3538): a goroutine blocked for good, the queue's lock held. Seen as the 1.36 integration suite
// failing in EtcdMain's goroutine check after its tests had passed.
func TestLabelerStopsCleanly(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	const ns, poolName = "pool-scheduler", "alpha"
	if _, err := cs.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := util.ShippedLabelerOptions(t)
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet(ns, poolName, map[string]string{"example.com/tier": "one"}))

	const nodes = 120
	for i := range nodes {
		util.CreateNode(tCtx, t, cs, util.Node(fmt.Sprintf("stop-%03d", i), map[string]string{poolKey: poolName}).Taints([]v1.Taint{startupTaint}).Obj())
	}
	// The churn runs for the whole test: nodes relabelled all the time, so every labeler started
	// (its initial list queues every node) has items ready and workers waiting when it is stopped.
	churnCtx, stopChurn := context.WithCancel(tCtx)
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		rng := rand.New(rand.NewSource(3538))
		for i := 0; churnCtx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/churn":"c%d"}}}`, i)
			// Its errors are the churn's end; what the test asserts is about goroutines.
			_, _ = cs.CoreV1().Nodes().Patch(churnCtx, fmt.Sprintf("stop-%03d", rng.Intn(nodes)), "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		}
	}()
	rng := rand.New(rand.NewSource(47))
	for range 25 {
		stop := util.RunLabelerAs(t, cp.Config, opts)
		time.Sleep(time.Duration(200+rng.Intn(400)) * time.Millisecond)
		stop()
	}
	stopChurn()
	churn.Wait()

	// A stopped queue's goroutines end within moments; a deadlocked one never does.
	var left []string
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		left = queueGoroutines()
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("%d work-queue goroutines left by stopped labelers:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// queueGoroutines returns the stacks of the goroutines running in controller-runtime's work
// queues or controller workers.
func queueGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.") ||
			strings.Contains(g, "sigs.k8s.io/controller-runtime/pkg/internal/controller.") {
			out = append(out, g)
		}
	}
	return out
}
