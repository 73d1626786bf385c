package profile

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			got, why := LeaderHealthy(tt.lease, 15*time.Second, now)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("healthy %v (%q), want %v (%q)", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}
