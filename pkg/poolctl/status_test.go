package poolctl

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	componentbaseconfig "k8s.io/component-base/config"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
)

// TestStatusJudgesAsTheWebhook: on the same Lease states, poolctl status's verdict is the
// webhook's (a running LeaseWatch whose clock agrees with the leader's within a lease duration,
// judged by the hand-off Judge). A clock further off is seen by a single read as by a webhook
// that starts now: only watching tells a live leader from a dead one. The version skew is left
// to the judges (poolctl is built from one line only: docs/operations.md).
func TestStatusJudgesAsTheWebhook(t *testing.T) {
	const duration = 15 * time.Second
	key := types.NamespacedName{Namespace: "pool-scheduler", Name: "pool-scheduler"}
	cfg := &schedconfig.KubeSchedulerConfiguration{LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect: true, ResourceLock: "leases", ResourceNamespace: key.Namespace, ResourceName: key.Name,
		LeaseDuration: metav1.Duration{Duration: duration},
	}}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	type lease struct {
		holder string
		// renewTime on the leader's clock, from now; nil: never renewed.
		renewed *time.Duration
	}
	at := func(d time.Duration) *time.Duration { return &d }
	tests := []struct {
		name  string
		lease *lease // nil: no Lease
		// seen: when the running webhook saw the Lease's last change, from now, on its clock.
		seen time.Duration
		// startsNow: the webhook starts now and lists the Lease (its first read).
		startsNow   bool
		wantHealthy bool
	}{
		{name: "no Lease"},
		{name: "renewed a second ago", lease: &lease{"scheduler-0", at(-time.Second)}, seen: -time.Second, wantHealthy: true},
		{name: "renewed within the lease duration", lease: &lease{"scheduler-0", at(-14 * time.Second)}, seen: -14 * time.Second, wantHealthy: true},
		{name: "expired", lease: &lease{"scheduler-0", at(-16 * time.Second)}, seen: -16 * time.Second},
		{name: "expired an hour ago", lease: &lease{"scheduler-0", at(-time.Hour)}, seen: -time.Hour},
		{name: "released within the lease duration (rolling upgrade)", lease: &lease{"", at(-5 * time.Second)}, seen: -5 * time.Second, wantHealthy: true},
		{name: "released longer ago", lease: &lease{"", at(-20 * time.Second)}, seen: -20 * time.Second},
		{name: "held, never renewed", lease: &lease{holder: "scheduler-0"}, seen: -time.Second},
		{name: "leader's clock 5s ahead", lease: &lease{"scheduler-0", at(4 * time.Second)}, seen: -time.Second, wantHealthy: true},
		{name: "leader's clock an hour ahead", lease: &lease{"scheduler-0", at(time.Hour)}, startsNow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var obj *coordinationv1.Lease
			if tt.lease != nil {
				obj = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tt.lease.holder)}}
				if tt.lease.renewed != nil {
					obj.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(*tt.lease.renewed)}
				}
			}

			// The webhook's path.
			cs := fake.NewClientset()
			if tt.startsNow && obj != nil {
				cs = fake.NewClientset(obj.DeepCopy())
			}
			var mu sync.Mutex
			clock := now.Add(tt.seen)
			if tt.startsNow {
				clock = now
			}
			tick := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
			w, err := handoff.NewLeaseWatch(cs, handoff.Lease{Lease: key, Duration: duration}, tick)
			if err != nil {
				t.Fatal(err)
			}
			go w.Run(ctx)
			if !toolscache.WaitForCacheSync(ctx.Done(), w.HasSynced) {
				t.Fatal("informer not synced")
			}
			if obj != nil && !tt.startsNow {
				// The informer delivers the fake's changes asynchronously.
				seen := func(holder string) {
					t.Helper()
					if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
						return w.Holder() == holder, nil
					}); err != nil {
						t.Fatalf("the watch never saw the Lease held by %q", holder)
					}
				}
				first := obj.DeepCopy()
				if tt.lease.holder == "" {
					// A release follows a hold: the watch sees the leader, then the release.
					first.Spec.HolderIdentity = ptr.To("scheduler-0")
					first.Spec.RenewTime = &metav1.MicroTime{Time: obj.Spec.RenewTime.Add(-2 * time.Second)}
				}
				created, err := cs.CoordinationV1().Leases(key.Namespace).Create(ctx, first, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				seen(*first.Spec.HolderIdentity)
				if tt.lease.holder == "" {
					released := obj.DeepCopy()
					released.ResourceVersion = created.ResourceVersion
					if _, err := cs.CoordinationV1().Leases(key.Namespace).Update(ctx, released, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
					seen("")
				}
			}
			mu.Lock()
			clock = now
			mu.Unlock()
			webhookOK, webhookWhy := (&handoff.Judge{Leader: w.Healthy}).Evaluate(ctx)

			// poolctl status's path: one read of the same states.
			var objs []runtime.Object
			if obj != nil {
				objs = append(objs, obj.DeepCopy())
			}
			pcs := fake.NewClientset(objs...)
			st := schedulerStatus(ctx, pcs, cfg, now)

			type verdict struct {
				Healthy bool
				Reason  string
			}
			if diff := cmp.Diff(verdict{webhookOK, webhookWhy}, verdict{st.Healthy, st.Reason}); diff != "" {
				t.Errorf("poolctl status's verdict differs from the webhook's (-webhook +status):\n%s", diff)
			}
			if st.Healthy != tt.wantHealthy {
				t.Errorf("healthy %v (%q), want %v", st.Healthy, st.Reason, tt.wantHealthy)
			}
		})
	}
}
