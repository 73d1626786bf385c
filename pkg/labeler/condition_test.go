package labeler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

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
				w.record("n1", "10", ready)
			}
			if tc.node == "n3" {
				w.record("n3", "7", corev1.NodeCondition{})
			}
			if got := w.wrote(tc.node, tc.rv, tc.cond); got != tc.want {
				t.Errorf("wrote(%q, %q, %s) = %v, want %v", tc.node, tc.rv, tc.cond.Reason, got, tc.want)
			}
		})
	}
	w := newConditionWrites()
	w.record("n1", "10", ready)
	w.forget("n1")
	if w.wrote("n1", "10", ready) {
		t.Error("a forgotten node's write is still remembered")
	}
}
