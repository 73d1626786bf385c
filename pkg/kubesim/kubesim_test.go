package kubesim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// The control plane's config is shared: the scheduler under test and its plugins build clients
// from it while the disruption controller starts (a data race in TestSimulateMaintenance when
// scale.NewForConfig set its fields in place).
func TestStartDisruptionControllerLeavesTheConfig(t *testing.T) {
	tCtx := ktesting.Init(t)
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 5000, Burst: 5000}
	before := *rest.CopyConfig(cfg)
	cp := &controlplane.ControlPlane{Config: cfg, Client: fake.NewClientset()}
	if err := StartDisruptionController(tCtx, cp); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, *cfg); diff != "" {
		t.Errorf("StartDisruptionController changed the control plane's config (-before +after):\n%s", diff)
	}
}
