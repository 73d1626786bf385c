//go:build k8s136

package domainspread

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

func TestSignPod(t *testing.T) {
	rs := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	for _, tt := range []struct {
		name     string
		pod      *v1.Pod
		signable bool
	}{
		{name: "replica: spread, not signable", pod: st.MakePod().Namespace("default").Name("web-0").OwnerReference("web", rs).Obj()},
		{name: "no controller", pod: st.MakePod().Namespace("default").Name("bare").Obj(), signable: true},
		{name: "DaemonSet pod", pod: st.MakePod().Namespace("default").Name("ds").OwnerReference("ds", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj(), signable: true},
		{name: "own spread constraints: left to PodTopologySpread", pod: st.MakePod().Namespace("default").Name("c").OwnerReference("web", rs).
			SpreadConstraint(1, "zone", v1.ScheduleAnyway, st.MakeLabelSelector().Obj(), nil, nil, nil, nil).Obj(), signable: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pl := newTestPlugin(t, ctx, defaultArgs(), nil, nil)
			got, status := pl.SignPod(ctx, tt.pod)
			if tt.signable {
				if !status.IsSuccess() || len(got) != 0 {
					t.Errorf("SignPod = %v, %v; want success and no fragment of its own", got, status)
				}
				return
			}
			if status.Code() != fwk.Unschedulable || status.Message() != ErrNotSignable {
				t.Errorf("SignPod status = %v, want Unschedulable %q", status, ErrNotSignable)
			}
		})
	}
}
