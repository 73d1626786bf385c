package spreadkeeper

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestInFlight(t *testing.T) {
	now := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	created := func(ago time.Duration) *st.PodWrapper {
		p := st.MakePod().Name("p")
		p.Pod.CreationTimestamp = metav1.NewTime(now.Add(-ago))
		return p
	}
	terminating := created(time.Second).Obj()
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	tests := []struct {
		name string
		pod  *v1.Pod
		want time.Duration
	}{
		{name: "just created, not judged yet", pod: created(time.Second).Obj(), want: inFlightWait - time.Second},
		{name: "bound", pod: created(time.Second).Node("n1").Obj(), want: 0},
		{name: "judged unschedulable", pod: created(time.Second).Condition(v1.PodScheduled, v1.ConditionFalse, v1.PodReasonUnschedulable).Obj(), want: 0},
		{name: "terminating", pod: terminating, want: 0},
		{name: "waiting longer than the keeper waits for it", pod: created(inFlightWait + time.Second).Obj(), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inFlight(tt.pod, now); got != tt.want {
				t.Errorf("inFlight = %v, want %v", got, tt.want)
			}
		})
	}
}
