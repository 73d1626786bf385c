package handoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestLeaseFromConfig: the Lease comes from the scheduler configuration's leaderElection;
// leader mode without leader election is refused with the way out.
func TestLeaseFromConfig(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	tests := []struct {
		name    string
		config  string
		mode    string
		want    *Lease
		wantErr string
	}{
		{name: "leader: the configured Lease and duration", mode: ModeLeader,
			config: head + "leaderElection: {leaderElect: true, resourceName: ps, resourceNamespace: ns, leaseDuration: 20s}\n",
			want:   &Lease{Lease: types.NamespacedName{Namespace: "ns", Name: "ps"}, Duration: 20 * time.Second}},
		{name: "leader: kube-scheduler's defaults", mode: ModeLeader, config: head,
			want: &Lease{Lease: types.NamespacedName{Namespace: "kube-system", Name: "kube-scheduler"}, Duration: 15 * time.Second}},
		{name: "leader without leader election", mode: ModeLeader, config: head + "leaderElection: {leaderElect: false}\n",
			wantErr: "use --handoff=always"},
		{name: "always", mode: ModeAlways, config: head + "leaderElection: {leaderElect: false}\n"},
		{name: "unknown mode", mode: "sometimes", config: head, wantErr: `--handoff: "sometimes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LeaseFromConfig([]byte(tt.config), tt.mode)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSkewStopsTheHandoff: a kube-apiserver minor this line does not serve stops the hand-off
// (whatever the leader), a failed read keeps the last verdict, and a served minor resumes it.
func TestSkewStopsTheHandoff(t *testing.T) {
	ctx := context.Background()
	var major, minor int
	if _, err := fmt.Sscanf(version.KubernetesLine(), "%d.%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	setServer := func(minor int) {
		fake.FakedServerVersion = &k8sversion.Info{Major: fmt.Sprint(major), Minor: fmt.Sprint(minor), GitVersion: fmt.Sprintf("v%d.%d.0", major, minor)}
	}
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "supported"})
	skew := &SkewCheck{Gauge: gauge}
	judge := &Judge{Skew: skew, Leader: func(context.Context) (bool, string) { return true, "" }}
	check := judge.check

	setServer(minor + 1)
	skew.Check(ctx, fake)
	if ok, why := check(ctx); !ok {
		t.Errorf("the next minor: hand-off stopped (%s)", why)
	}
	// A failed read while supported keeps the hand-off on.
	fake.PrependReactor("get", "version", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("unreachable")
	})
	skew.Check(ctx, fake)
	if ok, why := check(ctx); !ok {
		t.Errorf("a failed read stopped the hand-off (%s); want the last verdict kept", why)
	}
	fake.ReactionChain = nil
	setServer(minor + 2)
	skew.Check(ctx, fake)
	if ok, why := check(ctx); ok || !strings.Contains(why, "outside this line's") {
		t.Errorf("two minors newer: hand-off %v (%q), want stopped", ok, why)
	}
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("the supported gauge = %v, want 0", got)
	}
	fake.PrependReactor("get", "version", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("unreachable")
	})
	skew.Check(ctx, fake)
	if ok, _ := check(ctx); ok {
		t.Error("a failed read resumed the hand-off; want the last verdict kept")
	}
	fake.ReactionChain = nil
	setServer(minor)
	skew.Check(ctx, fake)
	if ok, why := check(ctx); !ok {
		t.Errorf("its own minor again: hand-off stopped (%s)", why)
	}
}

// TestLeaseWatch: the leader is healthy while this process saw it renew within the lease
// duration, whatever the leader's clock says; a Lease released more than the lease duration ago,
// or gone, is not; a Lease this process found at start is not until it sees it renewed.
func TestLeaseWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	key := types.NamespacedName{Namespace: "pool-scheduler", Name: "pool-scheduler"}
	w, err := NewLeaseWatch(cs, Lease{Lease: key, Duration: 15 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), w.HasSynced) {
		t.Fatal("informer not synced")
	}
	expect := func(t *testing.T, want bool, wantWhy string) {
		t.Helper()
		var ok bool
		var why string
		// The informer delivers the fake's changes asynchronously.
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			ok, why = w.Healthy(ctx)
			return ok == want && strings.Contains(why, wantWhy), nil
		})
		if err != nil {
			t.Errorf("healthy %v (%q), want %v (%q)", ok, why, want, wantWhy)
		}
	}
	expect(t, false, "no Lease pool-scheduler/pool-scheduler")

	// The leader's clock is an hour behind: what counts is when this process saw the renewal.
	renewed := func(holder string, at time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: at}}}
	}
	leaderClock := clock.Add(-time.Hour)
	if _, err := cs.CoordinationV1().Leases(key.Namespace).Create(ctx, renewed("scheduler-0", leaderClock), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, true, "")
	advance(16 * time.Second)
	expect(t, false, "has not renewed the Lease for 16s")
	if _, err := cs.CoordinationV1().Leases(key.Namespace).Update(ctx, renewed("scheduler-0", leaderClock.Add(16*time.Second)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, true, "")
	// Released by its leader (a rolling upgrade): healthy for the lease duration, in which a
	// standby takes it over; then not.
	if _, err := cs.CoordinationV1().Leases(key.Namespace).Update(ctx, renewed("", leaderClock.Add(18*time.Second)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait until the watch has the release (Healthy says true before and after it).
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.rec.holder == "", nil
	}); err != nil {
		t.Fatal("the release was never seen")
	}
	expect(t, true, "")
	advance(16 * time.Second)
	expect(t, false, "no holder for 16s")
	if err := cs.CoordinationV1().Leases(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, false, "no Lease")

	// A new watch finds a held Lease whose leader may be long dead: not healthy until renewed.
	if _, err := cs.CoordinationV1().Leases(key.Namespace).Create(ctx, renewed("scheduler-0", leaderClock.Add(20*time.Second)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w2, err := NewLeaseWatch(cs, Lease{Lease: key, Duration: 15 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	go w2.Run(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), w2.HasSynced) {
		t.Fatal("informer not synced")
	}
	w = w2
	expect(t, false, "no renewal of the Lease seen since this process started")
	if _, err := cs.CoordinationV1().Leases(key.Namespace).Update(ctx, renewed("scheduler-0", leaderClock.Add(22*time.Second)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, true, "")
}

// TestLeaseWatchAtStart: after a restart (of the webhook or the hand-off controller), a Lease
// found held and renewed within a lease duration of this process's clock counts as renewed at
// start, as client-go's leader election counts a record from when it first sees it, so new pods
// are not sent to the default scheduler until the next renewal; it expires a lease duration
// later unless renewed. A Lease renewed long ago (a dead leader), released, or stamped by a
// clock more than a lease duration off is not counted until a renewal is seen.
func TestLeaseWatchAtStart(t *testing.T) {
	const duration = 15 * time.Second
	key := types.NamespacedName{Namespace: "pool-scheduler", Name: "pool-scheduler"}
	for _, tt := range []struct {
		name    string
		holder  string
		renewed time.Duration // the Lease's renewTime, from this process's clock at start
		want    bool
		wantWhy string
	}{
		{name: "renewed a second ago", holder: "scheduler-0", renewed: -time.Second, want: true},
		{name: "renewed a lease duration ago", holder: "scheduler-0", renewed: -duration, want: true},
		{name: "renewed an hour ago: a dead leader", holder: "scheduler-0", renewed: -time.Hour, wantWhy: "no renewal of the Lease seen since this process started"},
		{name: "the leader's clock an hour ahead", holder: "scheduler-0", renewed: time.Hour, wantWhy: "no renewal of the Lease seen since this process started"},
		{name: "released a second ago", renewed: -time.Second, wantWhy: "no renewal of the Lease seen since this process started"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clock := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
			var mu sync.Mutex
			now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tt.holder), RenewTime: &metav1.MicroTime{Time: clock.Add(tt.renewed)}}}
			w, err := NewLeaseWatch(fake.NewClientset(lease), Lease{Lease: key, Duration: duration}, now)
			if err != nil {
				t.Fatal(err)
			}
			go w.Run(ctx)
			// The Lease reached the watch (its holder or renewal is recorded).
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.informer.HasSynced() && w.rec.renew != nil, nil
			}); err != nil {
				t.Fatal("the Lease never reached the watch")
			}
			ok, why := w.Healthy(ctx)
			if ok != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("at start: healthy %v (%q), want %v (%q)", ok, why, tt.want, tt.wantWhy)
			}
			if !tt.want {
				return
			}
			// Counted from start, not forever: no renewal for a lease duration is a dead leader.
			mu.Lock()
			clock = clock.Add(duration + time.Second)
			mu.Unlock()
			if ok, why := w.Healthy(ctx); ok || !strings.Contains(why, "has not renewed the Lease for 16s") {
				t.Errorf("a lease duration after start, no renewal: healthy %v (%q), want false", ok, why)
			}
		})
	}
}
