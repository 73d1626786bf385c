package heartbeat

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// TestParse: a heartbeat is read only when the holder named on the Lease wrote it, and all of
// it is there as numbers.
func TestParse(t *testing.T) {
	s := Sample{Attempts: 12, Waiting: 3, PodsRevision: 1234, NodesRevision: 99}
	tests := []struct {
		name   string
		labels map[string]string
		holder string
		want   Sample
		ok     bool
	}{
		{name: "its own", labels: s.Labels("a_1"), holder: "a_1", want: s, ok: true},
		{name: "another holder's left on the Lease", labels: s.Labels("a_1"), holder: "b_2"},
		{name: "none", labels: map[string]string{"x": "y"}, holder: "a_1"},
		{name: "one missing", labels: without(s.Labels("a_1"), WaitingLabel), holder: "a_1"},
		{name: "not a number", labels: with(s.Labels("a_1"), AttemptsLabel, "many"), holder: "a_1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.labels, tc.holder)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sample (-want +got):\n%s", diff)
			}
		})
	}
}

func without(m map[string]string, k string) map[string]string { delete(m, k); return m }
func with(m map[string]string, k, v string) map[string]string { m[k] = v; return m }

// TestLockWritesTheHeartbeat: acquiring and renewing the Lease write the sample of the moment
// as labels, beside the labels the Lease already carries.
func TestLockWritesTheHeartbeat(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	sample := Sample{Attempts: 1, PodsRevision: 10, NodesRevision: 11}
	l := &Lock{
		LeaseLock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "pool-scheduler"},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "host_1"},
		},
		Sample: func() Sample { return sample },
	}
	if err := l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "host_1"}); err != nil {
		t.Fatal(err)
	}
	check := func(want Sample) {
		t.Helper()
		lease, err := cs.CoordinationV1().Leases("ns").Get(ctx, "pool-scheduler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Parse(lease.Labels, "host_1")
		if !ok {
			t.Fatalf("no heartbeat of host_1 on the Lease: labels %v", lease.Labels)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("heartbeat (-want +got):\n%s", diff)
		}
	}
	check(sample)
	sample = Sample{Attempts: 7, Waiting: 2, PodsRevision: 20, NodesRevision: 11}
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "host_1"}); err != nil {
		t.Fatal(err)
	}
	check(sample)
}

type rv string

func (r rv) LastSyncResourceVersion() string { return string(r) }

// TestLoopSample: the attempts of every result and profile, and the active and backoff queues
// (not the unschedulable or gated ones), from the scheduler's stable metrics.
func TestLoopSample(t *testing.T) {
	reg := prometheus.NewRegistry()
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "scheduler_schedule_attempts_total"}, []string{"result", "profile"})
	pending := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "scheduler_pending_pods"}, []string{"queue"})
	reg.MustRegister(attempts, pending)
	attempts.WithLabelValues("scheduled", "pool-scheduler").Add(5)
	attempts.WithLabelValues("unschedulable", "pool-scheduler").Add(2)
	attempts.WithLabelValues("error", "other").Add(1)
	pending.WithLabelValues("active").Set(3)
	pending.WithLabelValues("backoff").Set(1)
	pending.WithLabelValues("unschedulable").Set(40)
	pending.WithLabelValues("gated").Set(7)
	l := &Loop{Gatherer: reg, Pods: rv("500"), Nodes: rv("")}
	want := Sample{Attempts: 8, Waiting: 4, PodsRevision: 500}
	if diff := cmp.Diff(want, l.Sample()); diff != "" {
		t.Errorf("sample (-want +got):\n%s", diff)
	}
}
