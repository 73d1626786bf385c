package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestLeaderHealthy: a leader is healthy while it renewed its Lease within the lease duration.
func TestLeaderHealthy(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		if renewedAgo >= 0 {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewedAgo)}
		}
		return l
	}
	tests := []struct {
		name    string
		lease   *coordinationv1.Lease
		want    bool
		wantWhy string
	}{
		{name: "renewed just now", lease: lease("a", 0), want: true},
		{name: "renewed within the duration", lease: lease("a", 14*time.Second), want: true},
		{name: "renewed longer ago", lease: lease("a", 16*time.Second), wantWhy: "last renewed the Lease 16s ago"},
		{name: "released (no holder)", lease: lease("", 0), wantWhy: "no holder"},
		{name: "never renewed", lease: lease("a", -1), wantWhy: "never renewed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := leaderHealthy(tt.lease, 15*time.Second, now)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("healthy %v (%q), want %v (%q)", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}

// TestHandoffFromConfig: the Lease comes from the scheduler configuration's leaderElection;
// leader mode without leader election is refused with the way out.
func TestHandoffFromConfig(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	tests := []struct {
		name    string
		config  string
		mode    string
		want    *HandoffLease
		wantErr string
	}{
		{name: "leader: the configured Lease and duration", mode: HandoffLeader,
			config: head + "leaderElection: {leaderElect: true, resourceName: ps, resourceNamespace: ns, leaseDuration: 20s}\n",
			want:   &HandoffLease{Lease: types.NamespacedName{Namespace: "ns", Name: "ps"}, Duration: 20 * time.Second}},
		{name: "leader: kube-scheduler's defaults", mode: HandoffLeader, config: head,
			want: &HandoffLease{Lease: types.NamespacedName{Namespace: "kube-system", Name: "kube-scheduler"}, Duration: 15 * time.Second}},
		{name: "leader without leader election", mode: HandoffLeader, config: head + "leaderElection: {leaderElect: false}\n",
			wantErr: "use --handoff=always"},
		{name: "always", mode: HandoffAlways, config: head + "leaderElection: {leaderElect: false}\n"},
		{name: "unknown mode", mode: "sometimes", config: head, wantErr: `--handoff: "sometimes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := HandoffFromConfig([]byte(tt.config), tt.mode)
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
