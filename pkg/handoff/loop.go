package handoff

import (
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/pool-scheduler/pool-scheduler/pkg/heartbeat"
)

// loopState judges pool-scheduler's leader by the heartbeat it publishes on its Lease
// (pkg/heartbeat), against what this process sees itself. The leader is wedged when:
//
//   - loop: pods wait in its active or backoff queue and its loop has finished no scheduling
//     attempt (of any result) for longer than the bound. Once wedged, only a finished attempt
//     (or a new leader) clears it: its queue emptying while pods are handed back does not, so
//     a wedge of an hour is one outage, with no probe handing pods to it in between;
//   - watch: a pod or node change this process saw more than the bound ago (its resource
//     version) is not yet in the leader's informers, which cover every pod and node. A stalled
//     watch shows nothing wrong in the loop (it judges the pods it knows, against the nodes it
//     knows); this shows it. Cleared once the leader's informer catches up (a relist).
//
// A pod that cannot be decided (gated, or judged Unschedulable) waits in the scheduler's
// unschedulable queue, which the heartbeat does not count: no tenant can make a healthy leader
// look wedged. A Lease with no heartbeat from its holder (a pool-scheduler that does not publish
// one) is judged by the Lease alone. Ages count on this process's clock from what it saw, and
// from the last fresh start (its own start, a new holder, the Lease healthy again) at the
// earliest.
type loopState struct {
	bound time.Duration

	mu        sync.Mutex
	started   time.Time
	fresh     time.Time
	holder    string
	published bool             // the holder's heartbeat was seen
	sample    heartbeat.Sample // the last one seen
	progress  time.Time        // the last finished attempt, empty queue or first pod waiting seen
	wedged    string           // why the loop is wedged; "" while it is not
	pods      revisions
	nodes     revisions
}

func newLoopState(bound time.Duration, now time.Time) *loopState {
	return &loopState{bound: bound, started: now, fresh: now}
}

// lease records a Lease as seen (nil: none) at now; healthy is the Lease rule's verdict.
func (s *loopState) lease(l *coordinationv1.Lease, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	holder := ""
	if l != nil && l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if holder != s.holder {
		s.holder = holder
		s.restart(now)
	}
	if l == nil || holder == "" {
		return
	}
	sample, ok := heartbeat.Parse(l.Labels, holder)
	if !ok {
		// Labels left by an earlier holder, or none: not this leader's heartbeat.
		s.published = false
		return
	}
	if !s.published || sample.Attempts != s.sample.Attempts {
		s.progress, s.wedged = now, ""
	}
	if s.wedged == "" && (sample.Waiting == 0 || s.sample.Waiting == 0) {
		// Idle, or pods started waiting now: the bound counts from here.
		s.progress = now
	}
	s.published, s.sample = true, sample
}

// restart: a new holder, or the Lease healthy again, starts afresh.
func (s *loopState) restart(now time.Time) {
	s.fresh, s.published, s.wedged, s.progress = now, false, "", time.Time{}
}

// seen records a pod's or node's resource version, seen at now.
func (s *loopState) seen(r *revisions, obj any, now time.Time) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	rev, ok := heartbeat.Revision(m.GetResourceVersion())
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.add(rev, now)
}

func (s *loopState) seenPod(obj any, now time.Time)  { s.seen(&s.pods, obj, now) }
func (s *loopState) seenNode(obj any, now time.Time) { s.seen(&s.nodes, obj, now) }

// check returns why the leader is wedged ("" while it is not) and how long its loop has shown
// no progress.
func (s *loopState) check(now time.Time) (why string, age time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	since := laterOf(s.progress, s.fresh)
	if !s.published {
		return "", now.Sub(since)
	}
	age = now.Sub(since)
	if s.wedged == "" && s.sample.Waiting > 0 && age > s.bound {
		s.wedged = fmt.Sprintf("pool-scheduler's leader %s renews its Lease but its scheduling loop has finished no attempt for %s while %d pods wait in its queue (progress bound %s)",
			s.holder, age.Round(time.Second), s.sample.Waiting, s.bound)
	}
	if s.wedged != "" {
		return s.wedged, age
	}
	for _, w := range []struct {
		what      string
		r         *revisions
		published uint64
	}{{"pod", &s.pods, s.sample.PodsRevision}, {"node", &s.nodes, s.sample.NodesRevision}} {
		rev, at, behind := w.r.behind(w.published)
		if behind && now.Sub(laterOf(at, s.fresh)) > s.bound {
			return fmt.Sprintf("pool-scheduler's leader %s renews its Lease but its %s watch is behind: a %s change (resource version %d) seen %s ago is not in its cache, which is at %d (progress bound %s)",
				s.holder, w.what, w.what, rev, now.Sub(at).Round(time.Second), w.published, s.bound), age
		}
	}
	return "", age
}

// revisions are the resource versions this process saw, each with when it first saw one at
// least that high, oldest first: what the leader's informers must reach.
type revisions struct {
	seen []revSeen
}

type revSeen struct {
	rev uint64
	at  time.Time
}

// maxRevisions bounds the list: while a watch stalls only its oldest entry matters.
const maxRevisions = 64

func (r *revisions) add(rev uint64, now time.Time) {
	n := len(r.seen)
	switch {
	case n > 0 && rev <= r.seen[n-1].rev:
		return // seen already (an older change, or a relist)
	case n > 0 && now.Sub(r.seen[n-1].at) < time.Second:
		r.seen[n-1].rev = rev // one entry a second: at most a second early
		return
	case n >= maxRevisions:
		r.seen = append(r.seen[:1], r.seen[2:]...)
	}
	r.seen = append(r.seen, revSeen{rev: rev, at: now})
}

// behind drops what the leader has reached (published) and returns the oldest change it has
// not, if any.
func (r *revisions) behind(published uint64) (rev uint64, at time.Time, ok bool) {
	i := 0
	for i < len(r.seen) && r.seen[i].rev <= published {
		i++
	}
	r.seen = r.seen[i:]
	if len(r.seen) == 0 {
		return 0, time.Time{}, false
	}
	return r.seen[0].rev, r.seen[0].at, true
}

// healthyAgain: the Lease healthy after an outage starts afresh, as a new holder does.
func (s *loopState) healthyAgain(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restart(now)
}
