// Package heartbeat is what pool-scheduler's leader says of its own scheduling loop, and how
// the hand-off controller reads it: with each renewal of its leader Lease (every retryPeriod, 2 s,
// a write the leader makes anyway), the leader sets five labels on the Lease: how many scheduling
// attempts its loop has run, how many pods wait in its active and backoff queues, and the
// resource versions its pod and node informers have reached, and which leader wrote them. No write is added, and nothing is
// read from pods: a pod that can never be decided (gated, or judged Unschedulable) waits in the
// scheduler's unschedulable queue, which the loop's health does not count.
package heartbeat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The labels on the leader Lease (label values: digits only, at most 20 of them).
const (
	// AttemptsLabel counts the scheduling attempts the leader's loop has finished since its
	// process started, whatever their result (bound, Unschedulable, error): it changes while
	// the loop runs cycles.
	AttemptsLabel = "heartbeat.pool-scheduler.io/attempts"
	// WaitingLabel is the number of pods in the leader's active and backoff queues: pods its
	// loop will take next. Gated and Unschedulable pods are not counted.
	WaitingLabel = "heartbeat.pool-scheduler.io/waiting"
	// PodsRevisionLabel and NodesRevisionLabel are the resource versions the leader's pod and
	// node informers last reached (events and watch bookmarks): a watch that stalls stays behind.
	PodsRevisionLabel  = "heartbeat.pool-scheduler.io/pods-revision"
	NodesRevisionLabel = "heartbeat.pool-scheduler.io/nodes-revision"
	// HolderLabel names the leader that wrote the others (HolderHash of its identity): a
	// pool-scheduler that publishes no heartbeat leaves an earlier leader's labels in place,
	// which must not be read as its own.
	HolderLabel = "heartbeat.pool-scheduler.io/holder"
)

// HolderHash is what HolderLabel carries: a label value cannot hold a holder identity
// (hostname_uuid, often longer than 63 characters).
func HolderHash(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:8])
}

// Sample is one reading of the loop, as published.
type Sample struct {
	Attempts, Waiting           uint64
	PodsRevision, NodesRevision uint64
}

// Labels are s as the Lease of holder carries it.
func (s Sample) Labels(holder string) map[string]string {
	return map[string]string{
		HolderLabel:        HolderHash(holder),
		AttemptsLabel:      strconv.FormatUint(s.Attempts, 10),
		WaitingLabel:       strconv.FormatUint(s.Waiting, 10),
		PodsRevisionLabel:  strconv.FormatUint(s.PodsRevision, 10),
		NodesRevisionLabel: strconv.FormatUint(s.NodesRevision, 10),
	}
}

// Parse reads the heartbeat of holder from its Lease's labels; ok is false unless holder wrote
// them and all four are numbers (a pool-scheduler that does not publish them: the Lease alone
// then tells).
func Parse(labels map[string]string, holder string) (s Sample, ok bool) {
	if labels[HolderLabel] != HolderHash(holder) {
		return Sample{}, false
	}
	for _, f := range []struct {
		key string
		to  *uint64
	}{{AttemptsLabel, &s.Attempts}, {WaitingLabel, &s.Waiting}, {PodsRevisionLabel, &s.PodsRevision}, {NodesRevisionLabel, &s.NodesRevision}} {
		v, present := labels[f.key]
		if !present {
			return Sample{}, false
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Sample{}, false
		}
		*f.to = n
	}
	return s, true
}

// Revision reads a resource version as the number etcd gives it; ok is false for anything else
// (an apiserver whose storage is not etcd: the revision checks are then off).
func Revision(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil && rv != ""
}

// Lock is the leader's Lease lock: client-go's LeaseLock, whose Labels are set from Sample before
// each write (acquire and renew). The elector calls Create and Update from one goroutine.
type Lock struct {
	*resourcelock.LeaseLock
	Sample func() Sample
}

var _ resourcelock.Interface = &Lock{}

// Create acquires a Lease that does not exist yet.
func (l *Lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.LeaseLock.Labels = l.Sample().Labels(l.Identity())
	return l.LeaseLock.Create(ctx, ler)
}

// Update acquires or renews the Lease.
func (l *Lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.LeaseLock.Labels = l.Sample().Labels(l.Identity())
	return l.LeaseLock.Update(ctx, ler)
}

// Loop samples the running scheduler from its own metrics (the stable
// scheduler_schedule_attempts_total and scheduler_pending_pods) and its informers.
type Loop struct {
	Gatherer    prometheus.Gatherer
	Pods, Nodes interface{ LastSyncResourceVersion() string }
}

// Sample reads the loop now. A metric not registered yet (before the scheduler runs) reads 0.
func (l *Loop) Sample() Sample {
	var s Sample
	if l.Gatherer != nil {
		families, _ := l.Gatherer.Gather() // what was gathered, even with an error elsewhere
		for _, f := range families {
			switch f.GetName() {
			case "scheduler_schedule_attempts_total":
				for _, m := range f.GetMetric() {
					s.Attempts += uint64(m.GetCounter().GetValue())
				}
			case "scheduler_pending_pods":
				for _, m := range f.GetMetric() {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == "queue" && (lp.GetValue() == "active" || lp.GetValue() == "backoff") {
							s.Waiting += uint64(max(m.GetGauge().GetValue(), 0))
						}
					}
				}
			}
		}
	}
	if l.Pods != nil {
		s.PodsRevision, _ = Revision(l.Pods.LastSyncResourceVersion())
	}
	if l.Nodes != nil {
		s.NodesRevision, _ = Revision(l.Nodes.LastSyncResourceVersion())
	}
	return s
}
