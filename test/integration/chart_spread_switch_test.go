package integration

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestHelmChartSpreadReadsHandoffSwitch: with the rebalancer on, the chart passes the hand-off
// controller's switch to the spread keeper and grants its account the reads the rebalancer's
// watch makes (get, list, watch on that one name), on the real apiserver with RBAC: the watch
// follows the switch from "false" (paused, with the controller's reason) to "true".
func TestHelmChartSpreadReadsHandoffSwitch(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	r, err := renderChart(t, chartNamespace, `{spread: {rebalance: {enabled: true}}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.objects {
		if o.GetKind() == "Deployment" && o.GetName() == "pool-scheduler-spread" {
			if args := containerArgs(t, o); !containsString(args, "--handoff-switch-configmap=pool-scheduler-handoff") {
				t.Errorf("spread keeper args %v: want --handoff-switch-configmap=pool-scheduler-handoff", args)
			}
		}
	}
	keeper, ids := spreadKeeperAccess(tCtx, t, cp, chartNamespace, "pool-scheduler", `{spread: {rebalance: {enabled: true}}}`)
	t.Logf("applied %v", ids)
	name := types.NamespacedName{Namespace: chartNamespace, Name: "pool-scheduler-handoff"}
	sw := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name},
		Data: map[string]string{handoff.SwitchKey: "false", handoff.SwitchReasonKey: "no healthy leader"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(name.Namespace).Create(tCtx, sw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := handoff.NewSwitchWatch(keeper, name)
	ctx, cancel := context.WithCancel(tCtx)
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	await := func(want string) {
		t.Helper()
		var got string
		if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got = w.Degraded()
			return got == want, nil
		}); err != nil {
			t.Fatalf("Degraded() = %q, want %q (RBAC?)", got, want)
		}
	}
	await("the hand-off controller judges pool-scheduler degraded: no healthy leader")
	sw.Data = map[string]string{handoff.SwitchKey: "true"}
	if _, err := cp.Client.CoreV1().ConfigMaps(name.Namespace).Update(tCtx, sw, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await("")
}
