package handoff

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/heartbeat"
)

// TestProgressVerdict: the heartbeat rule (loopState) on an injected clock. A leader is wedged
// when pods wait in its queue and its loop finishes no attempt for longer than the bound, or
// when a pod or node change seen here is not in its informers within the bound. An idle leader,
// a busy one, and a tenant's undecidable pod (never in the active or backoff queue) are healthy;
// once the loop is wedged the verdict holds while pods are handed back (its queue empties)
// until an attempt finishes or a new leader holds the Lease; a Lease without this holder's
// heartbeat is judged by the Lease alone.
func TestProgressVerdict(t *testing.T) {
	const bound = 30 * time.Second
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, s heartbeat.Sample) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler", Namespace: "pool-scheduler", Labels: s.Labels(holder)},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
		}
	}
	beat := func(holder string, attempts, waiting, pods, nodes uint64) func(*loopState, time.Time) {
		l := lease(holder, heartbeat.Sample{Attempts: attempts, Waiting: waiting, PodsRevision: pods, NodesRevision: nodes})
		return func(s *loopState, now time.Time) { s.lease(l, now) }
	}
	podAt := func(rv string) func(*loopState, time.Time) {
		p := st.MakePod().Namespace("ns").Name("p-" + rv).Obj()
		p.ResourceVersion = rv
		return func(s *loopState, now time.Time) { s.seenPod(p, now) }
	}
	nodeAt := func(rv string) func(*loopState, time.Time) {
		n := st.MakeNode().Name("n-" + rv).Obj()
		n.ResourceVersion = rv
		return func(s *loopState, now time.Time) { s.seenNode(n, now) }
	}
	noHeartbeat := func(holder string) func(*loopState, time.Time) {
		l := lease(holder, heartbeat.Sample{})
		l.Labels = map[string]string{"unrelated": "x"}
		return func(s *loopState, now time.Time) { s.lease(l, now) }
	}
	nothing := func(*loopState, time.Time) {}
	type step struct {
		at     time.Duration // since t0
		do     func(*loopState, time.Time)
		wedged string // a substring of the reason after the step; "" healthy
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "idle: nothing waits, nothing changes, for ten bounds: healthy", steps: []step{
			{at: 0, do: beat("a", 5, 0, 100, 100)},
			{at: 10 * bound, do: beat("a", 5, 0, 100, 100)},
		}},
		{name: "a tenant's undecidable pod: not in the queue the heartbeat counts, so healthy", steps: []step{
			// The pod's creation is seen here and reached by the leader's pod informer; it then
			// waits in the unschedulable (or gated) queue: waiting stays 0.
			{at: 0, do: podAt("120")},
			{at: time.Second, do: beat("a", 7, 0, 120, 100)},
			{at: 20 * bound, do: beat("a", 7, 0, 120, 100)},
		}},
		{name: "busy: pods always wait, attempts keep finishing: healthy", steps: []step{
			{at: 0, do: beat("a", 1, 500, 100, 100)},
			{at: 25 * time.Second, do: beat("a", 40, 480, 100, 100)},
			{at: 50 * time.Second, do: beat("a", 90, 450, 100, 100)},
			{at: 75 * time.Second, do: beat("a", 91, 449, 100, 100)},
		}},
		{name: "stuck loop: pods wait, no attempt for longer than the bound: wedged", steps: []step{
			{at: 0, do: beat("a", 9, 0, 100, 100)},
			{at: 5 * time.Second, do: beat("a", 9, 3, 100, 100)},
			{at: 5*time.Second + bound, do: beat("a", 9, 3, 100, 100)},
			{at: 6*time.Second + bound, do: nothing, wedged: "finished no attempt"},
		}},
		{name: "stuck loop: the verdict holds while its queue empties (pods handed back), until an attempt finishes", steps: []step{
			{at: 0, do: beat("a", 9, 2, 100, 100)},
			{at: bound + time.Second, do: nothing, wedged: "finished no attempt"},
			{at: bound + 2*time.Second, do: beat("a", 9, 0, 100, 100), wedged: "finished no attempt"},
			{at: 100 * bound, do: beat("a", 9, 0, 100, 100), wedged: "finished no attempt"},
			{at: 100*bound + time.Second, do: beat("a", 10, 0, 100, 100)},
		}},
		{name: "stuck loop: a new holder starts afresh", steps: []step{
			{at: 0, do: beat("a", 9, 2, 100, 100)},
			{at: bound + time.Second, do: nothing, wedged: "finished no attempt"},
			{at: bound + 2*time.Second, do: beat("b", 0, 2, 100, 100)},
			{at: 2*bound + time.Second, do: beat("b", 0, 2, 100, 100)},
			{at: 2*bound + 3*time.Second, do: nothing, wedged: "finished no attempt"},
		}},
		{name: "the Lease healthy again after an outage starts afresh", steps: []step{
			{at: 0, do: beat("a", 9, 2, 100, 100)},
			{at: bound + time.Second, do: nothing, wedged: "finished no attempt"},
			{at: bound + 2*time.Second, do: func(s *loopState, now time.Time) { s.healthyAgain(now) }},
			{at: bound + 3*time.Second, do: beat("a", 9, 2, 100, 100)},
		}},
		{name: "stalled node watch: a node change not reached within the bound: wedged, until it catches up", steps: []step{
			{at: 0, do: beat("a", 9, 0, 100, 100)},
			{at: time.Second, do: nodeAt("150")},
			{at: 2 * time.Second, do: beat("a", 12, 0, 160, 100)},
			{at: time.Second + bound, do: beat("a", 12, 0, 160, 100)},
			{at: 2*time.Second + bound, do: nothing, wedged: "node watch is behind"},
			{at: 3*time.Second + bound, do: beat("a", 12, 0, 160, 151)},
		}},
		{name: "stalled pod watch: pods handed over are never seen, the loop looks idle: wedged", steps: []step{
			{at: 0, do: beat("a", 9, 0, 100, 100)},
			{at: time.Second, do: podAt("130")},
			{at: 2*time.Second + bound, do: beat("a", 9, 0, 100, 100), wedged: "pod watch is behind"},
		}},
		{name: "watches that keep up: every change reached within the bound: healthy", steps: []step{
			{at: 0, do: podAt("110")},
			{at: time.Second, do: nodeAt("111")},
			{at: 2 * time.Second, do: beat("a", 1, 0, 110, 111)},
			{at: 10 * bound, do: beat("a", 1, 0, 110, 111)},
		}},
		{name: "no heartbeat from this holder (labels of another, or none): the Lease alone", steps: []step{
			{at: 0, do: noHeartbeat("a")},
			{at: time.Second, do: podAt("130")},
			{at: 10 * bound, do: noHeartbeat("a")},
			{at: 10*bound + time.Second, do: func(s *loopState, now time.Time) {
				// An earlier holder's labels left on the Lease by a holder that publishes none.
				l := lease("a", heartbeat.Sample{Attempts: 1, Waiting: 9})
				l.Spec.HolderIdentity = ptr.To("c")
				s.lease(l, now)
			}},
			{at: 20 * bound, do: nothing},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newLoopState(bound, t0)
			for i, step := range tc.steps {
				now := t0.Add(step.at)
				step.do(s, now)
				why, _ := s.check(now)
				switch {
				case step.wedged == "" && why != "":
					t.Fatalf("step %d (at %s): wedged (%s), want healthy", i, step.at, why)
				case step.wedged != "" && !strings.Contains(why, step.wedged):
					t.Fatalf("step %d (at %s): verdict %q, want wedged with %q", i, step.at, why, step.wedged)
				}
			}
		})
	}
}

// TestRevisionsBounded: however long a watch stalls, what is kept stays bounded, and the
// oldest change not reached is the one kept.
func TestRevisionsBounded(t *testing.T) {
	var r revisions
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for i := range 10000 {
		r.add(uint64(1000+i), t0.Add(time.Duration(i)*time.Second))
	}
	if len(r.seen) > maxRevisions {
		t.Errorf("kept %d revisions, want at most %d", len(r.seen), maxRevisions)
	}
	rev, at, ok := r.behind(500)
	if !ok || rev != 1000 || !at.Equal(t0) {
		t.Errorf("oldest not reached: %d at %s (%v), want 1000 at %s", rev, at, ok, t0)
	}
	if _, _, ok := r.behind(20000); ok {
		t.Error("everything reached: still behind")
	}
}

func TestValidateProgressBound(t *testing.T) {
	if err := ValidateProgressBound(-time.Second); err == nil || !strings.Contains(err.Error(), "--progress-bound") {
		t.Errorf("negative: %v, want an error naming --progress-bound", err)
	}
	for _, d := range []time.Duration{0, DefaultProgressBound} {
		if err := ValidateProgressBound(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
