package handoff

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// TestSwitchWatchDegraded: what another process (the rebalancer) reads from the hand-off
// controller's switch: healthy only while it says handoff "true"; missing or anything else is
// degraded, with the controller's reason when it wrote one.
func TestSwitchWatchDegraded(t *testing.T) {
	name := types.NamespacedName{Namespace: "pool-scheduler", Name: "pool-scheduler-handoff"}
	cm := func(ns, n string, data map[string]string) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}, Data: data}
	}
	tests := []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{name: "handoff true", objs: []runtime.Object{cm(name.Namespace, name.Name, map[string]string{SwitchKey: "true"})}},
		{
			name: "handoff false, with the controller's reason",
			objs: []runtime.Object{cm(name.Namespace, name.Name, map[string]string{SwitchKey: "false", SwitchReasonKey: "no healthy leader"})},
			want: "the hand-off controller judges pool-scheduler degraded: no healthy leader",
		},
		{
			name: "handoff empty, no reason",
			objs: []runtime.Object{cm(name.Namespace, name.Name, nil)},
			want: `the hand-off switch pool-scheduler/pool-scheduler-handoff says handoff=""`,
		},
		{
			name: "missing (another ConfigMap of that name elsewhere does not count)",
			objs: []runtime.Object{cm("default", name.Name, map[string]string{SwitchKey: "true"})},
			want: "the hand-off switch pool-scheduler/pool-scheduler-handoff is missing (is the hand-off controller installed?)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tCtx := ktesting.Init(t)
			w := NewSwitchWatch(fake.NewClientset(tt.objs...), name)
			if got := w.Degraded(); got != "the hand-off switch pool-scheduler/pool-scheduler-handoff is not read yet" {
				t.Errorf("before the first read: %q", got)
			}
			go func() { _ = w.Run(tCtx) }()
			if err := wait.PollUntilContextTimeout(tCtx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				return w.informer.HasSynced(), nil
			}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, w.Degraded()); diff != "" {
				t.Errorf("Degraded (-want +got):\n%s", diff)
			}
		})
	}
}
