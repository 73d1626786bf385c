package labeler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// TestHolds: a hold starts when a node is first seen held (or at the time a status recorded),
// survives a change of reason, ends when the node is ready; the warning is due once, after the
// configured time.
func TestHolds(t *testing.T) {
	h := newHolds()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	missing := pool.Verdict{Cause: pool.LabelsNotApplied, Pool: "spot", Key: "k", Missing: true}
	stale := pool.Verdict{Cause: pool.StaleLabel, Pool: "spot", Key: "old"}

	if since := h.observe("n1", missing, t0, time.Time{}); !since.Equal(t0) {
		t.Errorf("first hold since %v, want %v", since, t0)
	}
	if since := h.observe("n1", stale, t0.Add(time.Minute), time.Time{}); !since.Equal(t0) {
		t.Errorf("a new reason restarted the hold: since %v, want %v", since, t0)
	}
	recorded := t0.Add(-time.Hour)
	if since := h.observe("n2", missing, t0, recorded); !since.Equal(recorded) {
		t.Errorf("hold seeded from status since %v, want %v", since, recorded)
	}
	if due, wait := h.warn("n1", t0.Add(2*time.Minute), 5*time.Minute); due || wait != 3*time.Minute {
		t.Errorf("warn after 2m of 5m = %v, %v; want not due, 3m to wait", due, wait)
	}
	if due, _ := h.warn("n1", t0.Add(5*time.Minute), 5*time.Minute); !due {
		t.Error("warn after 5m of 5m: not due")
	}
	if due, wait := h.warn("n1", t0.Add(6*time.Minute), 5*time.Minute); due || wait != 0 {
		t.Errorf("second warn = %v, %v; want none", due, wait)
	}
	if due, wait := h.warn("n2", t0, 0); due || wait != 0 {
		t.Errorf("warn with the event off = %v, %v; want none", due, wait)
	}

	got := map[string]map[string]int{}
	for p, ph := range h.byPool() {
		got[p] = ph.byReason
		if p == "spot" && !ph.oldest.Equal(recorded) {
			t.Errorf("oldest hold of spot %v, want %v", ph.oldest, recorded)
		}
	}
	if diff := cmp.Diff(map[string]map[string]int{"spot": {"StaleLabel": 1, "MissingLabel": 1}}, got); diff != "" {
		t.Errorf("holds by pool (-want +got):\n%s", diff)
	}
	h.observe("n1", pool.Verdict{Cause: pool.Ready, Pool: "spot"}, t0.Add(7*time.Minute), time.Time{})
	h.forget("n2")
	if n := len(h.byPool()); n != 0 {
		t.Errorf("%d pools still held after the nodes became ready or went away", n)
	}
}
