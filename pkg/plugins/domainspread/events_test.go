package domainspread

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

func TestHints(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	args := defaultArgs()
	args.Mode = config.SpreadHard
	pl := newTestPlugin(t, ctx, args, nil, nil)
	pod := rsPod("new", "rs-a", "")
	tests := []struct {
		name     string
		old, new any
		fn       func(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error)
		want     fwk.QueueingHint
	}{
		{name: "workload replica deleted", old: rsPod("a1", "rs-a", "fd0-ud0"), fn: pl.isSchedulableAfterPodChange, want: fwk.Queue},
		{name: "other workload's pod deleted", old: rsPod("b1", "rs-b", "fd0-ud0"), fn: pl.isSchedulableAfterPodChange, want: fwk.QueueSkip},
		{name: "unscheduled replica added", new: rsPod("a2", "rs-a", ""), fn: pl.isSchedulableAfterPodChange, want: fwk.QueueSkip},
		{name: "node with domains added", new: node("n", "1", "2"), fn: pl.isSchedulableAfterNodeChange, want: fwk.Queue},
		{name: "node domain changed", old: node("n", "1", "2"), new: node("n", "1", "0"), fn: pl.isSchedulableAfterNodeChange, want: fwk.Queue},
		{name: "node deleted", old: node("n", "1", "2"), fn: pl.isSchedulableAfterNodeChange, want: fwk.Queue},
		{name: "node cordoned", old: node("n", "1", "2"), new: func() *v1.Node { n := node("n", "1", "2"); n.Spec.Unschedulable = true; return n }(), fn: pl.isSchedulableAfterNodeChange, want: fwk.Queue},
		{name: "replica starts terminating", old: rsPod("a1", "rs-a", "fd0-ud0"), new: func() *v1.Pod { p := rsPod("a1", "rs-a", "fd0-ud0"); p.DeletionTimestamp = &metav1.Time{}; return p }(), fn: pl.isSchedulableAfterPodChange, want: fwk.Queue},
		{name: "replica relabelled", old: rsPod("a1", "rs-a", "fd0-ud0"), new: func() *v1.Pod { p := rsPod("a1", "rs-a", "fd0-ud0"); p.Labels = map[string]string{"x": "y"}; return p }(), fn: pl.isSchedulableAfterPodChange, want: fwk.QueueSkip},
		{name: "node labels changed, domains did not", old: node("n", "1", "2"), new: func() *v1.Node { n := node("n", "1", "2"); n.Labels["x"] = "y"; return n }(), fn: pl.isSchedulableAfterNodeChange, want: fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(logger, pod, tt.old, tt.new)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}
