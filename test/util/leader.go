package util

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Replicas are processes that elect a leader through a Lease (pool-scheduler or pool-labeler
// replicas), for tests that kill the leader and watch another one take over.
type Replicas struct {
	Client                    kubernetes.Interface
	LeaseNamespace, LeaseName string
	// Start starts one more replica, as the Deployment's ReplicaSet would.
	Start func() *SchedulerProcess
	// FirstWorkAfter returns the first piece of work a leader did (a binding, a label write)
	// after a time, if any.
	FirstWorkAfter func(time.Time) (time.Time, bool)

	// LeaseTimeout bounds the wait for a new Lease holder after a kill (0: 60 s).
	LeaseTimeout time.Duration

	// Procs are every replica started, killed ones included; Killed those killed.
	Procs, Killed []*SchedulerProcess
	// Holder is the Lease holder seen last.
	Holder string
}

// Takeover is how the Lease moved after a leader was killed.
type Takeover struct {
	// Holder is the replica that took the Lease.
	Holder string
	// Lease and FirstWork are the times from the kill to the new holder and to its first work.
	Lease, FirstWork time.Duration
}

// StartReplicas starts n replicas and waits for one of them to take the Lease.
func (r *Replicas) StartReplicas(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r.Procs = append(r.Procs, r.Start())
	}
	r.Holder, _ = WaitForLeaseHolder(ctx, t, r.Client, r.LeaseNamespace, r.LeaseName, "", 60*time.Second)
}

// acquired matches what client-go's leader election logs when a replica takes the Lease:
// `successfully acquired lease ns/name` up to client-go 0.35, a structured record
// `"Successfully acquired lease" lock="ns/name"` from 0.36 (the 1.36 release line).
func (r *Replicas) acquired() *regexp.Regexp {
	lock := regexp.QuoteMeta(r.LeaseNamespace + "/" + r.LeaseName)
	return regexp.MustCompile(`successfully acquired lease ` + lock + `\b|"Successfully acquired lease" lock="` + lock + `"`)
}

// Leader waits until exactly one live replica has logged taking the Lease and working() holds,
// and returns that replica. Two live replicas that both logged it fail at once.
func (r *Replicas) Leader(ctx context.Context, timeout time.Duration, working func() bool) (*SchedulerProcess, error) {
	var leader *SchedulerProcess
	acquired := r.acquired()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		leader = nil
		for _, p := range r.Procs {
			if !p.Exited() && acquired.MatchString(p.Output()) {
				if leader != nil {
					return false, fmt.Errorf("two live replicas logged taking the Lease (%s)", acquired)
				}
				leader = p
			}
		}
		return leader != nil && working(), nil
	})
	return leader, err
}

// KillLeader SIGKILLs leader, starts a replacement, waits (LeaseTimeout) for another replica to take
// the Lease and then for its first work, within workTimeout of taking it. The error says the
// new holder did no work.
func (r *Replicas) KillLeader(ctx context.Context, t *testing.T, leader *SchedulerProcess, workTimeout time.Duration) (Takeover, error) {
	t.Helper()
	killedAt := time.Now()
	leader.Kill(t)
	r.Killed = append(r.Killed, leader)
	r.Procs = append(r.Procs, r.Start())

	leaseTimeout := r.LeaseTimeout
	if leaseTimeout == 0 {
		leaseTimeout = 60 * time.Second
	}
	holder, leaseAt := WaitForLeaseHolder(ctx, t, r.Client, r.LeaseNamespace, r.LeaseName, r.Holder, leaseTimeout)
	r.Holder = holder
	took := Takeover{Holder: holder, Lease: leaseAt.Sub(killedAt)}
	var workAt time.Time
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, workTimeout, true, func(context.Context) (bool, error) {
		var ok bool
		workAt, ok = r.FirstWorkAfter(leaseAt)
		return ok, nil
	})
	if err != nil {
		return took, fmt.Errorf("new leader %s did no work within %v of taking the Lease", holder, workTimeout)
	}
	took.FirstWork = workAt.Sub(killedAt)
	return took, nil
}
