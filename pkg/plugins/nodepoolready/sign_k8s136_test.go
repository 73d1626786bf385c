//go:build k8s136

package nodepoolready

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

func TestSignPod(t *testing.T) {
	pod := st.MakePod().Name("p").Namespace("default").Obj()
	dsPod := st.MakePod().Name("ds").Namespace("default").OwnerReference("ds", appsv1.SchemeGroupVersion.WithKind("DaemonSet")).Obj()
	for _, tt := range []struct {
		name string
		args func(*config.NodePoolReadyArgs)
		pod  *v1.Pod
		want bool
	}{
		{name: "judged pod", pod: pod, want: false},
		{name: "exempt DaemonSet pod", pod: dsPod, want: true},
		{name: "DaemonSet pod judged when not exempt", args: func(a *config.NodePoolReadyArgs) { a.IgnoreDaemonSetPods = false }, pod: dsPod, want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := defaultArgs()
			if tt.args != nil {
				tt.args(args)
			}
			_, ctx := ktesting.NewTestContext(t)
			got, status := newTestPlugin(t, args).SignPod(ctx, tt.pod)
			if !status.IsSuccess() {
				t.Fatalf("SignPod: %v, want success (every pod is signable)", status)
			}
			if diff := cmp.Diff([]fwk.SignFragment{{Key: SignKey, Value: tt.want}}, got); diff != "" {
				t.Errorf("SignPod (-want +got):\n%s", diff)
			}
		})
	}
}
