package domainspread

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/test/util/plugintest"
)

// TestReplicaIndex replays informer events and the plugin's Reserve/Unreserve and checks the
// replicas counted per node for workloads rs-a and rs-b ("<workload>/<node>").
func TestReplicaIndex(t *testing.T) {
	pending := rsPod("p1", "rs-a", "")
	bound := rsPod("p1", "rs-a", "n1")
	terminating := bound.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{}
	orphaned := bound.DeepCopy()
	orphaned.OwnerReferences = nil
	adopted := withOwnerUID(bound.DeepCopy(), "rs-b")
	succeeded := bound.DeepCopy()
	succeeded.Status.Phase = v1.PodSucceeded

	type step struct {
		add, update, del *v1.Pod
		tombstone        bool
		reserve          string // node
		unreserve        bool
	}
	tests := []struct {
		name  string
		steps []step
		want  map[string]int32
	}{
		{name: "bound pod", steps: []step{{add: bound}}, want: map[string]int32{"rs-a/n1": 1}},
		{name: "pending pod", steps: []step{{add: pending}}, want: map[string]int32{}},
		{name: "pod without controller", steps: []step{{add: orphaned}}, want: map[string]int32{}},
		{name: "two pods on one node", steps: []step{{add: bound}, {add: rsPod("p2", "rs-a", "n1")}, {add: rsPod("p3", "rs-a", "n2")}},
			want: map[string]int32{"rs-a/n1": 2, "rs-a/n2": 1}},
		{name: "workloads and namespaces counted apart",
			steps: []step{{add: rsPod("p2", "rs-b", "n1")}, {add: func() *v1.Pod { p := rsPod("p3", "rs-a", "n1"); p.Namespace = "other"; return p }()}},
			want:  map[string]int32{"rs-b/n1": 1}},
		{name: "reserved pod counts before the informer sees it bound", steps: []step{{reserve: "n2"}}, want: map[string]int32{"rs-a/n2": 1}},
		{name: "a stale pending update does not uncount a reserved pod",
			steps: []step{{add: pending}, {reserve: "n1"}, {update: pending}}, want: map[string]int32{"rs-a/n1": 1}},
		{name: "reserved then bound counts once", steps: []step{{reserve: "n1"}, {update: bound}}, want: map[string]int32{"rs-a/n1": 1}},
		{name: "the informer's binding wins over a later assumption",
			steps: []step{{add: bound}, {reserve: "n2"}, {unreserve: true}}, want: map[string]int32{"rs-a/n1": 1}},
		{name: "unreserve uncounts an assumed pod", steps: []step{{reserve: "n1"}, {unreserve: true}}, want: map[string]int32{}},
		{name: "unreserve keeps a pod the informer saw bound",
			steps: []step{{reserve: "n1"}, {update: bound}, {unreserve: true}}, want: map[string]int32{"rs-a/n1": 1}},
		{name: "unreserve before the informer saw it bound, then bound", steps: []step{{reserve: "n1"}, {unreserve: true}, {update: bound}},
			want: map[string]int32{"rs-a/n1": 1}},
		{name: "finished pod uncounted", steps: []step{{add: bound}, {update: succeeded}}, want: map[string]int32{}},
		{name: "terminating pod uncounted", steps: []step{{add: bound}, {update: terminating}}, want: map[string]int32{}},
		{name: "deleted pod uncounted", steps: []step{{add: bound}, {del: bound}}, want: map[string]int32{}},
		{name: "deleted pod uncounted from a tombstone", steps: []step{{add: bound}, {del: bound, tombstone: true}}, want: map[string]int32{}},
		{name: "deleted while assumed", steps: []step{{reserve: "n1"}, {del: pending}}, want: map[string]int32{}},
		{name: "orphaned pod uncounted", steps: []step{{add: bound}, {update: orphaned}}, want: map[string]int32{}},
		{name: "adopted by another workload", steps: []step{{add: bound}, {update: adopted}}, want: map[string]int32{"rs-b/n1": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ktesting.Init(t)
			pl := newTestPlugin(t, ctx, defaultArgs(), nil, nil)
			h := pl.replicas.handler(ctx.Logger())
			for _, s := range tt.steps {
				switch {
				case s.add != nil:
					h.OnAdd(s.add, false)
				case s.update != nil:
					h.OnUpdate(nil, s.update)
				case s.del != nil && s.tombstone:
					h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/" + s.del.Name, Obj: s.del})
				case s.del != nil:
					h.OnDelete(s.del)
				case s.reserve != "":
					if st := pl.Reserve(ctx, framework.NewCycleState(), pending, s.reserve); !st.IsSuccess() {
						t.Fatal(st)
					}
				case s.unreserve:
					pl.Unreserve(ctx, framework.NewCycleState(), pending, "n1")
				}
			}
			got := map[string]int32{}
			for _, rs := range []string{"rs-a", "rs-b"} {
				w, _ := workloadOf(rsPod("x", rs, ""))
				pl.replicas.each(w, func(node string, n int32) { got[rs+"/"+node] = n })
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replicas per workload/node (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReservedReplicaSteersTheNextOne: two replicas scheduled back to back, the first reserved
// but not yet bound, land in different domains.
func TestReservedReplicaSteersTheNextOne(t *testing.T) {
	ctx := ktesting.Init(t)
	nodes := grid(2, 1)
	pl := newTestPlugin(t, ctx, defaultArgs(), nil, nodes)
	first := rsPod("p1", "rs-a", "")
	if status := pl.Reserve(ctx, framework.NewCycleState(), first, "fd0-ud0"); !status.IsSuccess() {
		t.Fatal(status)
	}
	got, status := scores(t, ctx, pl, rsPod("p2", "rs-a", ""), nodes)
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff([]string{"fd1-ud0"}, best(got)); diff != "" {
		t.Errorf("best nodes for the second replica (-want +got):\n%s", diff)
	}
	pl.Unreserve(ctx, framework.NewCycleState(), first, "fd0-ud0")
	if got, _ = scores(t, ctx, pl, rsPod("p2", "rs-a", ""), nodes); len(best(got)) != 2 {
		t.Errorf("after Unreserve, want both nodes best, got scores %v", got)
	}
}

// fakeRegistration is an event handler registration whose initial list is delivered when told.
// The embedded interface (nil) carries the methods the index never calls, whose set differs
// between client-go releases (0.36 added HasSyncedChecker).
type fakeRegistration struct {
	cache.ResourceEventHandlerRegistration
	synced atomic.Bool
	asked  atomic.Int32
}

func (r *fakeRegistration) HasSynced() bool {
	r.asked.Add(1)
	return r.synced.Load()
}

// TestCountWaitsForTheIndex: a cycle before the pod informer has delivered its initial list to
// the index waits for it, and fails with an error (not empty counts) if it never comes.
func TestCountWaitsForTheIndex(t *testing.T) {
	ctx := ktesting.Init(t)
	pl := newTestPlugin(t, ctx, defaultArgs(), nil, grid(1, 1))
	reg := &fakeRegistration{}
	pl.replicas = newReplicaIndex()
	pl.replicas.registration = reg
	pl.replicas.syncTimeout = 50 * time.Millisecond
	pod := rsPod("p", "rs-a", "")
	if status := pl.PreScore(ctx, framework.NewCycleState(), pod, nil); status.Code() != fwk.Error {
		t.Fatalf("PreScore before the initial list: want an error, got %v", status)
	}
	pl.replicas.syncTimeout = time.Minute
	reg.asked.Store(0)
	go func() {
		// Deliver the initial list once the cycle has found it missing and is waiting.
		_ = wait.PollUntilContextTimeout(ctx, time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return reg.asked.Load() > 0, nil
		})
		reg.synced.Store(true)
	}()
	// Skip: the workload has no replica yet, so there is nothing to spread against.
	if status := pl.PreScore(ctx, framework.NewCycleState(), pod, nil); !status.IsSkip() {
		t.Fatalf("PreScore once the initial list arrived: %v, want Skip", status)
	}
	if reg.asked.Load() < 2 {
		t.Errorf("PreScore did not wait for the initial list (asked %d times)", reg.asked.Load())
	}
}

// TestHintLeavesTheIndexAlone: the hint only decides. The scheduler calls it once per waiting
// pod and not at all when none waits, so the index must not depend on it: the replica stays
// counted until the pod informer reports it gone.
func TestHintLeavesTheIndexAlone(t *testing.T) {
	ctx := ktesting.Init(t)
	replica := rsPod("p1", "rs-a", "fd0-ud0")
	pl := newTestPlugin(t, ctx, defaultArgs(), []*v1.Pod{replica}, grid(2, 1))
	terminating := replica.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{}
	for _, tt := range []struct {
		name           string
		oldObj, newObj any
	}{
		{name: "deleted", oldObj: replica},
		{name: "terminating", oldObj: replica, newObj: terminating},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hint, err := pl.isSchedulableAfterPodChange(ctx.Logger(), rsPod("p2", "rs-a", ""), tt.oldObj, tt.newObj)
			if err != nil || hint != fwk.Queue {
				t.Fatalf("hint = %v, %v; want Queue", hint, err)
			}
			if n := pl.replicas.len(); n != 1 {
				t.Errorf("replicas counted after the hint: %d, want the informer's 1", n)
			}
		})
	}
}

// TestReplicaGoneActivatesWaitingPods: once the pod informer makes the index uncount a replica,
// the workload's pods that Hard mode counted for and that are not placed yet are activated (a
// retry the hint started may have run before the index had the change). Placed pods, other
// workloads' pods and replicas that still count activate nothing.
func TestReplicaGoneActivatesWaitingPods(t *testing.T) {
	ctx := ktesting.Init(t)
	args := defaultArgs()
	args.Mode = config.SpreadHard
	replica := rsPod("r1", "rs-a", "fd0-ud0")
	pl := newTestPlugin(t, ctx, args, []*v1.Pod{replica}, grid(2, 1))
	h := &plugintest.Activator{}
	pl.handle = h
	handler := pl.replicas.handler(ctx.Logger())

	waitingA, placedA, waitingB := rsPod("wa", "rs-a", ""), rsPod("pa", "rs-a", ""), rsPod("wb", "rs-b", "")
	for _, p := range []*v1.Pod{waitingA, placedA, waitingB} {
		if _, status := pl.PreFilter(ctx, framework.NewCycleState(), p, nil); !status.IsSuccess() {
			t.Fatal(status)
		}
	}
	if status := pl.Reserve(ctx, framework.NewCycleState(), placedA, "fd1-ud0"); !status.IsSuccess() {
		t.Fatal(status)
	}
	// A replica that keeps counting (relabelled) activates nothing.
	handler.OnUpdate(replica, replica.DeepCopy())
	if got := h.Take(); len(got) != 0 {
		t.Errorf("activated %v, want none", got)
	}
	handler.OnDelete(replica)
	if diff := cmp.Diff([]string{"default/wa"}, h.Take()); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
	// Once only: the workload's waiting pods were taken.
	handler.OnDelete(replica)
	if got := h.Take(); len(got) != 0 {
		t.Errorf("activated again: %v", got)
	}
}
