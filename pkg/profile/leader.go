package profile

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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

// LeaderHealthy reports whether lease shows a leader that renewed it within d of now, and if
// not, why: the definition of a running pool-scheduler that the webhook's hand-off and poolctl
// status share.
func LeaderHealthy(lease *coordinationv1.Lease, d time.Duration, now time.Time) (bool, string) {
	switch {
	case lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "":
		return false, "the Lease has no holder"
	case lease.Spec.RenewTime == nil:
		return false, "the Lease was never renewed"
	}
	if age := now.Sub(lease.Spec.RenewTime.Time); age > d {
		return false, fmt.Sprintf("the leader %s last renewed the Lease %s ago (lease duration %s)", *lease.Spec.HolderIdentity, age.Round(time.Second), d)
	}
	return true, ""
}
