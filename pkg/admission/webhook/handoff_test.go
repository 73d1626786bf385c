package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

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
	skew := &skewCheck{}
	check := handoffCheck(skew, func(context.Context) (bool, string) { return true, "" })

	setServer(minor + 1)
	skew.check(ctx, fake)
	if ok, why := check(ctx); !ok {
		t.Errorf("the next minor: hand-off stopped (%s)", why)
	}
	setServer(minor + 2)
	skew.check(ctx, fake)
	if ok, why := check(ctx); ok || !strings.Contains(why, "outside this line's") {
		t.Errorf("two minors newer: hand-off %v (%q), want stopped", ok, why)
	}
	if got := testutil.ToFloat64(apiserverSupported); got != 0 {
		t.Errorf("pool_scheduler_webhook_apiserver_supported = %v, want 0", got)
	}
	fake.PrependReactor("get", "version", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("unreachable")
	})
	skew.check(ctx, fake)
	if ok, _ := check(ctx); ok {
		t.Error("a failed read resumed the hand-off; want the last verdict kept")
	}
	fake.ReactionChain = nil
	setServer(minor)
	skew.check(ctx, fake)
	if ok, why := check(ctx); !ok {
		t.Errorf("its own minor again: hand-off stopped (%s)", why)
	}
}
