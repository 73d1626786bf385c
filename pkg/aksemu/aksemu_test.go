package aksemu

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFloor(t *testing.T) {
	got := map[int]int{}
	for _, r := range []int{1, 2, 3, 4, 5, 6, 24, 30} {
		got[r] = Floor(r)
	}
	want := map[int]int{1: 0, 2: 0, 3: 2, 4: 3, 5: 4, 6: 4, 24: 16, 30: 20}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Floor (-want +got):\n%s", diff)
	}
}

func rsPod(name string, ready, terminating bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-00-r1", Controller: ptrTrue()}}}}
	if ready {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func ptrTrue() *bool { b := true; return &b }

// TestReadyTracker: Ready replicas count pods Ready and not terminating, as the ReplicaSet's
// readyReplicas does; a change after the start is a timeline point and may lower the minimum.
func TestReadyTracker(t *testing.T) {
	minute := 0.0
	tr := &readyTracker{pods: map[string]podState{}, ready: map[string]int{}, clock: func() float64 { return minute },
		wl: map[string]*MaintainedWorkload{"default/replicaset/web-00-r1": {Name: "default/replicaset/web-00-r1", Replicas: 3, Floor: 2}}}
	for _, name := range []string{"a", "b", "c"} {
		tr.observe(rsPod(name, false, false), false)
		tr.observe(rsPod(name, true, false), false)
	}
	if !tr.allReady() {
		t.Fatal("3 Ready pods of 3 replicas: not all Ready")
	}
	tr.start()
	minute = 2
	tr.observe(rsPod("a", true, true), false) // evicted: terminating
	minute = 2.5
	tr.observe(rsPod("b", true, true), false)
	tr.observe(rsPod("a", true, true), true) // gone: no second drop
	minute = 3
	tr.observe(rsPod("d", true, false), false)
	minute = 4
	tr.stop()
	got := tr.wl["default/replicaset/web-00-r1"]
	want := &MaintainedWorkload{Name: "default/replicaset/web-00-r1", Replicas: 3, Floor: 2, MinReady: 1,
		Timeline: []ReadyPoint{{0, 3}, {2, 2}, {2.5, 1}, {3, 2}, {4, 2}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tracked workload (-want +got):\n%s", diff)
	}
}

// TestBudgetRefusal: only the Eviction API's budget refusals count as refusals; a 429 a loaded
// API server sheds (no budget cause) and other errors are retried uncounted.
func TestBudgetRefusal(t *testing.T) {
	withCause := func(msg string) error {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return err
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "budget refuses", err: withCause("The disruption budget web needs 11 healthy pods and has 11 currently"), want: true},
		{name: "budget not yet processed", err: withCause("The disruption budget web is still being processed by the server."), want: true},
		{name: "API Priority and Fairness sheds the request", err: apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)},
		{name: "server error", err: apierrors.NewInternalError(errTest)},
		{name: "evicted", err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := budgetRefusal(tt.err); got != tt.want {
				t.Errorf("budgetRefusal(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

var errTest = errors.New("etcd timeout")

// TestValidatePlan: Run refuses a plan it could not finish (a step of no nodes loops for ever, a
// zero time scale divides by zero) before it touches the cluster, naming the field.
func TestValidatePlan(t *testing.T) {
	valid := func(kind string, mod func(*UpgradePlan)) *UpgradePlan {
		p := &UpgradePlan{Kind: kind, Nodes: []string{"n0", "n1"}, MaxSurge: 1, DrainBatchSize: 1, Budget: 1, TimeScale: 60,
			NewNode: func(int, int) *v1.Node { return &v1.Node{} }}
		if mod != nil {
			mod(p)
		}
		return p
	}
	tests := []struct {
		name    string
		plan    *UpgradePlan
		wantErr string
	}{
		{name: "surge", plan: valid(SurgeUpgrade, nil)},
		{name: "blue-green", plan: valid(BlueGreen, nil)},
		{name: "consolidation", plan: valid(Consolidation, nil)},
		{name: "no surge", plan: valid(SurgeUpgrade, func(p *UpgradePlan) { p.MaxSurge = 0 }), wantErr: "surgeUpgrade MaxSurge: 0"},
		{name: "no drain batch", plan: valid(BlueGreen, func(p *UpgradePlan) { p.DrainBatchSize = 0 }), wantErr: "blueGreen DrainBatchSize: 0"},
		{name: "no budget", plan: valid(Consolidation, func(p *UpgradePlan) { p.Budget = 0 }), wantErr: "consolidation Budget: 0"},
		{name: "unknown kind", plan: valid("reimage", nil), wantErr: `kind "reimage"`},
		{name: "no time scale", plan: valid(SurgeUpgrade, func(p *UpgradePlan) { p.TimeScale = 0 }), wantErr: "TimeScale 0"},
		{name: "no nodes", plan: valid(SurgeUpgrade, func(p *UpgradePlan) { p.Nodes = nil }), wantErr: "Nodes: the pool has none"},
		{name: "no NewNode", plan: valid(SurgeUpgrade, func(p *UpgradePlan) { p.NewNode = nil }), wantErr: "NewNode: nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.plan.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}
