package labeler

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

func TestConditionWrites(t *testing.T) {
	ready := ConditionFor(pool.Verdict{Pool: "gpu"})
	held := corev1.NodeCondition{Type: pool.ConditionPoolLabelsApplied, Status: corev1.ConditionFalse, Reason: "LabelsMissing", Message: "pool gpu: labels missing"}
	tests := []struct {
		name   string
		record bool
		node   string
		rv     string
		cond   corev1.NodeCondition
		want   bool
	}{
		{name: "nothing written", node: "n1", rv: "10", cond: ready, want: false},
		{name: "the same condition on the version it was written on", record: true, node: "n1", rv: "10", cond: ready, want: true},
		{name: "another version of the node", record: true, node: "n1", rv: "11", cond: ready, want: false},
		{name: "another condition", record: true, node: "n1", rv: "10", cond: held, want: false},
		{name: "another node", record: true, node: "n2", rv: "10", cond: ready, want: false},
		{name: "no resourceVersion", record: true, node: "n1", rv: "", cond: ready, want: false},
		{name: "a removal on the version it was made on", node: "n3", rv: "7", cond: corev1.NodeCondition{}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newConditionWrites()
			if tc.record {
				w.record("n1", "10", ready, t0)
			}
			if tc.node == "n3" {
				w.record("n3", "7", corev1.NodeCondition{}, t0)
			}
			if got := w.wrote(tc.node, tc.rv, tc.cond); got != tc.want {
				t.Errorf("wrote(%q, %q, %s) = %v, want %v", tc.node, tc.rv, tc.cond.Reason, got, tc.want)
			}
		})
	}
	w := newConditionWrites()
	w.record("n1", "10", ready, t0)
	w.forget("n1")
	if w.wrote("n1", "10", ready) {
		t.Error("a forgotten node's write is still remembered")
	}
}

// TestConditionWriteCap: a node's condition is written at most conditionWriteBudget times per
// conditionWriteWindow; past that, the write waits for the window's end, and a new window
// starts afresh.
func TestConditionWriteCap(t *testing.T) {
	ready := ConditionFor(pool.Verdict{Pool: "gpu"})
	tests := []struct {
		name   string
		writes []time.Duration // after t0
		at     time.Duration
		want   time.Duration
	}{
		{name: "never written", at: 0, want: 0},
		{name: "under the budget", writes: []time.Duration{0, time.Second, 2 * time.Second}, at: 3 * time.Second, want: 0},
		{name: "the budget spent", writes: []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}, at: 10 * time.Second, want: 50 * time.Second},
		{name: "the window over", writes: []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}, at: time.Minute, want: 0},
		{name: "a new window counts afresh", writes: []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 61 * time.Second}, at: 62 * time.Second, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newConditionWrites()
			for i, d := range tc.writes {
				w.record("n1", fmt.Sprint(i), ready, t0.Add(d))
			}
			if got := w.wait("n1", t0.Add(tc.at)); got != tc.want {
				t.Errorf("wait = %v, want %v", got, tc.want)
			}
			if got := w.wait("n2", t0.Add(tc.at)); got != 0 {
				t.Errorf("another node waits %v, want 0", got)
			}
		})
	}
}

// TestConditionChanged: node updates that change PoolLabelsApplied pass (a forged condition is
// judged again at once); the kubelet's heartbeats of other conditions do not.
func TestConditionChanged(t *testing.T) {
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := ConditionFor(pool.Verdict{Pool: "gpu"})
	forged := ready
	forged.Status, forged.Reason = corev1.ConditionFalse, "Forged"
	heartbeat := ready
	heartbeat.LastHeartbeatTime = metav1.NewTime(t0)
	kubelet := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	kubeletLater := kubelet
	kubeletLater.LastHeartbeatTime = metav1.NewTime(t0)
	tests := []struct {
		name     string
		old, new *corev1.Node
		want     bool
	}{
		{name: "the kubelet's heartbeat", old: node(kubelet, ready), new: node(kubeletLater, ready), want: false},
		{name: "only its heartbeat time", old: node(ready), new: node(heartbeat), want: false},
		{name: "forged", old: node(kubelet, ready), new: node(kubelet, forged), want: true},
		{name: "set by someone else", old: node(kubelet), new: node(kubelet, forged), want: true},
		{name: "removed", old: node(ready), new: node(), want: true},
		{name: "neither has it", old: node(kubelet), new: node(kubeletLater), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (conditionChanged{}).Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
}
