//go:build k8s136

package systempoolguard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

func TestSignPod(t *testing.T) {
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "user pod", pod: st.MakePod().Namespace("default").Obj(), want: false},
		{name: "system pod", pod: st.MakePod().Namespace("kube-system").Obj(), want: true},
		// The skipped Filter changes no verdict, so the pod signs as any user pod.
		{name: "user pod with admission's affinity", pod: admittedPod(t, defaultArgs()), want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			got, status := newTestPlugin(t, nil).SignPod(ctx, tt.pod)
			if !status.IsSuccess() {
				t.Fatalf("SignPod: %v, want success (every pod is signable)", status)
			}
			if diff := cmp.Diff([]fwk.SignFragment{{Key: SignKey, Value: tt.want}}, got); diff != "" {
				t.Errorf("SignPod (-want +got):\n%s", diff)
			}
		})
	}
}
