package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// TestMutateDegradedSpread: in degraded mode a workload's pod gets one ScheduleAnyway
// constraint per DomainSpread dimension over its first key where every node carries that key
// (zone and host: not the update domain, which would switch PodTopologySpread's scoring off on
// every node without it), selected by the pod's value of the label
// that names its workload; pods without a workload, with constraints of their own, handed to
// pool-scheduler, or of a profile without DomainSpread get none.
func TestMutateDegradedSpread(t *testing.T) {
	args := profile.DefaultArgs()
	rs := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	spread := func(key, value string, skew int32) []v1.TopologySpreadConstraint {
		var out []v1.TopologySpreadConstraint
		for _, tk := range []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
			out = append(out, v1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: tk, WhenUnsatisfiable: v1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}})
		}
		return out
	}
	own := []v1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: v1.DoNotSchedule}}
	tests := []struct {
		name    string
		pod     *v1.Pod
		spread  *config.DomainSpreadArgs
		handOff bool
		want    []v1.TopologySpreadConstraint
	}{
		{name: "ReplicaSet pod", pod: st.MakePod().Label("pod-template-hash", "h").OwnerReference("web", rs).Obj(), spread: args.DomainSpread, want: spread("pod-template-hash", "h", 1)},
		{name: "StatefulSet pod", pod: st.MakePod().Label("controller-revision-hash", "r").OwnerReference("db", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}).Obj(),
			spread: args.DomainSpread, want: spread("controller-revision-hash", "r", 1)},
		{name: "Job pod", pod: st.MakePod().Label("batch.kubernetes.io/controller-uid", "u").OwnerReference("j", schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}).Obj(),
			spread: args.DomainSpread, want: spread("batch.kubernetes.io/controller-uid", "u", 1)},
		{name: "maxSkew follows the args", pod: st.MakePod().Label("pod-template-hash", "h").OwnerReference("web", rs).Obj(),
			spread: &config.DomainSpreadArgs{Dimensions: args.DomainSpread.Dimensions, MaxSkew: 2}, want: spread("pod-template-hash", "h", 2)},
		{name: "ReplicaSet pod without its hash label", pod: st.MakePod().OwnerReference("web", rs).Obj(), spread: args.DomainSpread},
		{name: "bare pod", pod: st.MakePod().Label("pod-template-hash", "h").Obj(), spread: args.DomainSpread},
		{name: "own constraints kept as they are", pod: st.MakePod().Label("pod-template-hash", "h").OwnerReference("web", rs).SpreadConstraint(2, "kubernetes.io/hostname", v1.DoNotSchedule, nil, nil, nil, nil, nil).Obj(),
			spread: args.DomainSpread, want: own},
		{name: "handed to pool-scheduler: DomainSpread spreads it", pod: st.MakePod().Label("pod-template-hash", "h").OwnerReference("web", rs).Obj(), spread: args.DomainSpread, handOff: true},
		{name: "no DomainSpread in the profile", pod: st.MakePod().Label("pod-template-hash", "h").OwnerReference("web", rs).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMutator("pool-scheduler", args.SystemPoolGuard, false)
			if err != nil {
				t.Fatal(err)
			}
			m.WithDegradedSpread(tt.spread)
			var r Result
			if tt.handOff {
				r = m.Mutate(tt.pod)
			} else {
				r = m.MutateDegraded(tt.pod)
			}
			if diff := cmp.Diff(tt.want, tt.pod.Spec.TopologySpreadConstraints); diff != "" {
				t.Errorf("constraints (-want +got):\n%s", diff)
			}
			if added := tt.want != nil && !cmp.Equal(tt.want, own); r.TopologySpread != added {
				t.Errorf("Result.TopologySpread = %v, want %v", r.TopologySpread, added)
			}
		})
	}
}
