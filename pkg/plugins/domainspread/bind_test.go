package domainspread

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	"github.com/pool-scheduler/pool-scheduler/pkg/spread"
)

func withCost(p *v1.Pod, cost int32) *v1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[spread.DeletionCostAnnotation] = strconv.Itoa(int(cost))
	return p
}

// TestReserveChoosesDeletionCosts replays informer events and Reserve calls and checks the
// deletion cost each reserved pod's binding is to carry ("-": none, Bind skips the pod).
func TestReserveChoosesDeletionCosts(t *testing.T) {
	type step struct {
		add     *v1.Pod // informer
		del     *v1.Pod
		reserve *v1.Pod
		unres   bool
	}
	withConstraints := rsPod("c1", "rs-a", "")
	withConstraints.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule}}
	statefulSetPod := st.MakePod().Namespace("default").Name("s1").UID("s1").OwnerReference("sts", v1.SchemeGroupVersion.WithKind("StatefulSet")).Obj()
	statefulSetPod.OwnerReferences[0].UID = "sts"
	tests := []struct {
		name  string
		off   bool
		steps []step
		want  []string
	}{
		{name: "placement order: each replica below the last",
			steps: []step{{reserve: rsPod("p1", "rs-a", "")}, {reserve: rsPod("p2", "rs-a", "")}, {reserve: rsPod("p3", "rs-a", "")}},
			want:  []string{"0", "-1024", "-2048"}},
		{name: "below the costs bound replicas carry, and 0 for one without",
			steps: []step{{add: withCost(rsPod("b1", "rs-a", "n1"), -5000)}, {reserve: rsPod("p1", "rs-a", "")}, {add: rsPod("b2", "rs-b", "n1")}, {reserve: rsPod("p2", "rs-b", "")}},
			want:  []string{"-6024", "-1024"}},
		{name: "a keeper's correction seen on a bound replica lowers the next cost",
			steps: []step{{add: rsPod("b1", "rs-a", "n1")}, {add: withCost(rsPod("b1", "rs-a", "n1"), 3000)}, {add: withCost(rsPod("b2", "rs-a", "n2"), -100)}, {reserve: rsPod("p1", "rs-a", "")}},
			want:  []string{"-1124"}},
		{name: "a workload with no replica left starts again at 0",
			steps: []step{{add: withCost(rsPod("b1", "rs-a", "n1"), -4096)}, {del: rsPod("b1", "rs-a", "n1")}, {reserve: rsPod("p1", "rs-a", "")}},
			want:  []string{"0"}},
		{name: "an unreserved pod's cost is not given again",
			steps: []step{{reserve: rsPod("p1", "rs-a", "")}, {unres: true}, {reserve: rsPod("p2", "rs-a", "")}, {reserve: rsPod("p3", "rs-a", "")}},
			want:  []string{"0", "0", "-1024"}},
		{name: "a pod whose template sets the cost keeps it, and the next goes below it",
			steps: []step{{reserve: withCost(rsPod("p1", "rs-a", ""), 50)}, {reserve: rsPod("p2", "rs-a", "")}},
			want:  []string{"-", "-974"}},
		{name: "no cost left below the lowest",
			steps: []step{{add: withCost(rsPod("b1", "rs-a", "n1"), math.MinInt32+1000)}, {reserve: rsPod("p1", "rs-a", "")}},
			want:  []string{"-"}},
		{name: "pods the ReplicaSet controller does not rank, or DomainSpread does not spread",
			steps: []step{{reserve: statefulSetPod}, {reserve: withConstraints}},
			want:  []string{"-", "-"}},
		{name: "deletionCostAtBind off", off: true,
			steps: []step{{reserve: rsPod("p1", "rs-a", "")}},
			want:  []string{"-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ktesting.Init(t)
			args := defaultArgs()
			args.DeletionCostAtBind = !tt.off
			pl := newTestPlugin(t, ctx, args, nil, nil)
			h := pl.replicas.handler(ctx.Logger())
			var got []string
			var last *v1.Pod
			for _, s := range tt.steps {
				switch {
				case s.add != nil:
					h.OnAdd(s.add, false)
				case s.del != nil:
					h.OnDelete(cache.DeletedFinalStateUnknown{Obj: s.del})
				case s.unres:
					pl.Unreserve(ctx, framework.NewCycleState(), last, "n9")
				default:
					state := framework.NewCycleState()
					if st := pl.Reserve(ctx, state, s.reserve, "n9"); !st.IsSuccess() {
						t.Fatal(st)
					}
					last = s.reserve
					c, err := state.Read(bindStateKey)
					if err != nil {
						got = append(got, "-")
						continue
					}
					got = append(got, strconv.Itoa(int(c.(*bindState).cost)))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("costs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBindSkipsPodsWithoutACost: a pod Reserve chose no cost for is left to DefaultBinder.
func TestBindSkipsPodsWithoutACost(t *testing.T) {
	ctx := ktesting.Init(t)
	pl := newTestPlugin(t, ctx, defaultArgs(), nil, nil)
	pod := rsPod("p1", "rs-a", "")
	pod.UID = types.UID("p1")
	if st := pl.Bind(ctx, framework.NewCycleState(), pod, "n1"); st.Code() != fwk.Skip {
		t.Errorf("Bind = %v, want Skip", st)
	}
}
