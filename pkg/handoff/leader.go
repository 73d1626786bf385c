package handoff

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// LeaderLease returns the Lease pool-scheduler's leader renews, from the configuration's
// leaderElection, and how long a renewal counts (its leaseDuration: after it, a standby takes
// the Lease over); ok is false when the configuration elects no leader (no Lease to read).
func LeaderLease(cfg *schedconfig.KubeSchedulerConfiguration) (lease types.NamespacedName, d time.Duration, ok bool) {
	le := cfg.LeaderElection
	if !le.LeaderElect || le.ResourceLock != "leases" {
		return types.NamespacedName{}, 0, false
	}
	return types.NamespacedName{Namespace: le.ResourceNamespace, Name: le.ResourceName}, le.LeaseDuration.Duration, true
}

// leaseRecord is what the leader-health rule knows of the Lease: its holder and renewTime as
// last read, and when the reader saw that renewal on its own clock (zero: none seen).
type leaseRecord struct {
	holder   string
	renew    *metav1.MicroTime
	observed time.Time
}

// see records lease (nil: gone) read at now by a reader that watches it; initial marks the
// watch's first list. A renewal counts from when it is seen, so the leader's clock does not
// matter once renewals are seen.
func (r *leaseRecord) see(lease *coordinationv1.Lease, initial bool, d time.Duration, now time.Time) {
	if lease == nil {
		r.holder, r.renew = "", nil
		return
	}
	r.holder = ""
	if lease.Spec.HolderIdentity != nil {
		r.holder = *lease.Spec.HolderIdentity
	}
	rt := lease.Spec.RenewTime
	switch {
	case rt == nil:
	case initial:
		// A renewal counts from the first change this process sees (every retryPeriod, 2 s,
		// while the leader runs): the leader's clock is not ours. But a Lease held at start
		// counts as renewed now, as client-go's leader election counts a record from when it
		// first sees it (a standby waits a lease duration from then), when its renewTime is
		// within a lease duration of our clock: so a restart does not send new pods to the
		// default scheduler until the next renewal. One renewed an hour ago (a dead leader) is
		// not counted; a clock off by more than a lease duration only brings back that wait. A
		// leader dead within the last lease duration is judged healthy for at most one more,
		// the same as a leader that dies while this process runs.
		r.renew = rt.DeepCopy()
		if skew := now.Sub(rt.Time); r.holder != "" && skew <= d && -skew <= d {
			r.observed = now
		}
	case r.renew == nil || !rt.Equal(r.renew):
		r.renew, r.observed = rt.DeepCopy(), now
	}
}

// readOnce is the record of a reader that reads lease (nil: none) once, at now: it takes the
// last change as seen when its renewTime says, which is what a watching reader whose clock
// agrees with the leader's within a lease duration saw. A renewTime further ahead of our clock is
// not believed, as at a watch's start.
func readOnce(lease *coordinationv1.Lease, d time.Duration, now time.Time) leaseRecord {
	var r leaseRecord
	r.see(lease, false, d, now)
	if r.renew != nil {
		r.observed = time.Time{}
		if !r.renew.Time.After(now.Add(d)) {
			r.observed = r.renew.Time
		}
	}
	return r
}

// health is the leader-health rule: the leader is healthy while its Lease was seen renewed (or
// released by its leader) within the lease duration d; if not, why. The webhook, the hand-off
// controller and poolctl status all judge by it.
func (r *leaseRecord) health(lease types.NamespacedName, d time.Duration, now time.Time) (bool, string) {
	age := now.Sub(r.observed)
	switch {
	case r.renew == nil && r.holder == "":
		return false, fmt.Sprintf("no Lease %s, or no holder: pool-scheduler does not run", lease)
	case r.observed.IsZero():
		return false, "no renewal of the Lease seen since this process started"
	case age > d && r.holder == "":
		return false, fmt.Sprintf("the Lease has had no holder for %s (lease duration %s)", age.Round(time.Second), d)
	case age > d:
		return false, fmt.Sprintf("the leader %s has not renewed the Lease for %s (lease duration %s)", r.holder, age.Round(time.Second), d)
	}
	// A Lease released within the lease duration (kube-scheduler's leader releases it when it
	// stops, as in a rolling upgrade) is healthy: a standby takes it within its retry period.
	return true, ""
}

// ReadLeader is the leader-health verdict from one read, at now, of h's Lease (nil: none): the
// webhook's verdict on the same Lease, but for what only watching shows (renewals stamped by a
// clock more than a lease duration off, and the progress check). poolctl status reports it.
func ReadLeader(lease *coordinationv1.Lease, h Lease, now time.Time) (bool, string) {
	r := readOnce(lease, h.Duration, now)
	return r.health(h.Lease, h.Duration, now)
}
