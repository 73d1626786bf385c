package handoff

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestProgressVerdict: the progress rule on an injected clock. A leader is wedged only when a
// pod handed to it has waited undecided longer than the bound and nothing was bound or judged
// within it; gated and Unschedulable pods do not count, SchedulerError does; a busy leader that
// binds stays healthy; once wedged the verdict holds (hysteresis) until progress, a new leader,
// or a probe after reprobeFactor bounds with nothing left waiting.
func TestProgressVerdict(t *testing.T) {
	const bound = 30 * time.Second
	const sched = "pool-scheduler"
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pending := func(name string) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName(sched).Obj()
		p.Status.Phase = v1.PodPending
		return p
	}
	withCondition := func(p *v1.Pod, reason, msg string) *v1.Pod {
		p = p.DeepCopy()
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg,
			LastTransitionTime: metav1.NewTime(t0)}}
		return p
	}
	bind := func(p *v1.Pod) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.NodeName = "node-1"
		return p
	}
	gated := func(p *v1.Pod) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
		return p
	}
	type step struct {
		at     time.Duration // since t0
		do     func(s *progressState, now time.Time)
		wedged bool // the verdict after the step
	}
	add := func(p *v1.Pod) func(*progressState, time.Time) {
		return func(s *progressState, now time.Time) { s.add(p, now) }
	}
	update := func(o, n *v1.Pod) func(*progressState, time.Time) {
		return func(s *progressState, now time.Time) { s.update(o, n, now) }
	}
	remove := func(p *v1.Pod) func(*progressState, time.Time) {
		return func(s *progressState, now time.Time) { s.remove(p.UID) }
	}
	leader := func(ok bool, holder string) func(*progressState, time.Time) {
		return func(s *progressState, now time.Time) { s.lease(ok, holder, now) }
	}
	nothing := func(*progressState, time.Time) {}
	a, b, c := pending("a"), pending("b"), pending("c")
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "a pod undecided past the bound with no progress: wedged", steps: []step{
			{at: 0, do: add(a)},
			{at: bound, do: nothing},
			{at: bound + time.Second, do: nothing, wedged: true},
		}},
		{name: "no pod handed over: an idle leader is healthy", steps: []step{
			{at: 10 * bound, do: nothing},
		}},
		{name: "a pod seen late counts from when it was seen, not from its creation", steps: []step{
			{at: 20 * time.Second, do: add(a)},
			{at: 20*time.Second + bound, do: nothing},
			{at: 21*time.Second + bound, do: nothing, wedged: true},
		}},
		{name: "busy: a large backlog waits, but a bind within every bound keeps it healthy", steps: []step{
			{at: 0, do: add(a)},
			{at: 0, do: add(b)},
			{at: 0, do: add(c)},
			{at: 25 * time.Second, do: update(a, bind(a))},
			{at: 50 * time.Second, do: update(b, bind(b))},
			{at: 50*time.Second + bound, do: nothing},
			{at: 51*time.Second + bound, do: nothing, wedged: true},
		}},
		{name: "an Unschedulable verdict is progress, and the judged pod no longer waits undecided", steps: []step{
			{at: 0, do: add(a)},
			{at: 20 * time.Second, do: update(a, withCondition(a, v1.PodReasonUnschedulable, "0/3 nodes"))},
			{at: 5 * bound, do: nothing},
		}},
		{name: "a SchedulerError is no progress", steps: []step{
			{at: 0, do: add(a)},
			{at: 20 * time.Second, do: update(a, withCondition(a, v1.PodReasonSchedulerError, "binding rejected"))},
			{at: bound + time.Second, do: nothing, wedged: true},
		}},
		{name: "a gated pod is not waiting for a decision; its wait starts when the gate goes", steps: []step{
			{at: 0, do: add(gated(a))},
			{at: 3 * bound, do: nothing},
			{at: 3 * bound, do: update(gated(a), a)},
			{at: 4 * bound, do: nothing},
			{at: 4*bound + time.Second, do: nothing, wedged: true},
		}},
		{name: "a deleted pod no longer counts, and its deletion is no progress", steps: []step{
			{at: 0, do: add(a)},
			{at: 0, do: add(b)},
			{at: 10 * time.Second, do: remove(a)},
			{at: bound + time.Second, do: nothing, wedged: true},
		}},
		{name: "hysteresis: with the overdue pods gone the verdict holds until the probe", steps: []step{
			{at: 0, do: add(a)},
			{at: bound + time.Second, do: nothing, wedged: true},
			{at: 2 * bound, do: nothing, wedged: true},
			// Handed back: the last pod that showed the wedge goes.
			{at: 2 * bound, do: remove(a), wedged: true},
			{at: 2*bound + reprobeFactor*bound - time.Second, do: nothing, wedged: true},
			{at: 2*bound + reprobeFactor*bound, do: nothing},
			// The probe is a fresh start: what is handed over next gets a whole bound.
			{at: 2*bound + reprobeFactor*bound, do: add(b)},
			{at: 3*bound + reprobeFactor*bound, do: nothing},
			{at: 3*bound + reprobeFactor*bound + time.Second, do: nothing, wedged: true},
		}},
		{name: "wedged, then a bind: healthy at once", steps: []step{
			{at: 0, do: add(a)},
			{at: 0, do: add(b)},
			{at: bound + time.Second, do: nothing, wedged: true},
			{at: 2 * bound, do: update(a, bind(a))},
		}},
		{name: "wedged, then a new leader: a fresh bound for it", steps: []step{
			{at: 0, do: leader(true, "one")},
			{at: 0, do: add(a)},
			{at: bound + time.Second, do: nothing, wedged: true},
			{at: 2 * bound, do: leader(true, "two")},
			{at: 3 * bound, do: nothing},
			{at: 3*bound + time.Second, do: nothing, wedged: true},
		}},
		{name: "the Lease healthy again after an outage: a fresh bound", steps: []step{
			{at: 0, do: leader(true, "one")},
			{at: 0, do: add(a)},
			{at: 20 * time.Second, do: leader(false, "one")},
			{at: 2 * bound, do: leader(true, "one")},
			{at: 3 * bound, do: nothing},
			{at: 3*bound + time.Second, do: nothing, wedged: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newProgressState(sched, bound, t0)
			var want, got []bool
			for _, st := range tt.steps {
				now := t0.Add(st.at)
				st.do(s, now)
				wedged, why, _ := s.check(now)
				if wedged && why == "" {
					t.Errorf("at %s: wedged with no reason", st.at)
				}
				want, got = append(want, st.wedged), append(got, wedged)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("wedged after each step (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrimPod: the cache keeps what the verdict reads and nothing else.
func TestTrimPod(t *testing.T) {
	p := st.MakePod().Namespace("ns").Name("p").UID("u").SchedulerName("pool-scheduler").Node("n").
		SchedulingGates([]string{"g"}).Container("c").Labels(map[string]string{"a": "b"}).Obj()
	p.Status.Phase = v1.PodPending
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}, {Type: v1.PodReady, Status: v1.ConditionFalse}}
	got, err := trimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
		Spec:       v1.PodSpec{SchedulerName: "pool-scheduler", NodeName: "n", SchedulingGates: []v1.PodSchedulingGate{{Name: "g"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestValidateProgressBound: a negative bound is refused naming the flag; 0 turns it off.
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
