package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// mutatingAdmissionPolicyGA is the first Kubernetes minor serving MutatingAdmissionPolicy as
// admissionregistration.k8s.io/v1 by default (and v1beta1 no longer by default).
const mutatingAdmissionPolicyGA = 36

// TestAdmissionPolicyPathOfThisLine: the kustomize path for the MutatingAdmissionPolicy that the
// docs give for this line's clusters (1.36+: manifests/admission/policy-ga; 1.34/1.35:
// manifests/admission/policy, with the beta API enabled as its comment says) applies to an API
// server of this line and, following the switch the hand-off controller (bin/pool-labeler handoff,
// its Deployment's arguments) writes, gives new pods of an opted-in namespace to pool-scheduler
// while its leader renews the Lease and leaves them with the default scheduler (with the
// system-node affinity) once it stops; DaemonSet pods are never touched. The other path is
// refused there, because its API version is not served.
func TestAdmissionPolicyPathOfThisLine(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t) // the beta API enabled, as on a 1.34/1.35 cluster set up for it
	sv, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := strconv.Atoi(strings.TrimSuffix(sv.Minor, "+"))
	if err != nil {
		t.Fatalf("server minor %q: %v", sv.Minor, err)
	}
	own, other := "manifests/admission/policy", "manifests/admission/policy-ga"
	if minor >= mutatingAdmissionPolicyGA {
		// As a 1.36+ cluster comes: no runtime-config, v1 served by default.
		cp = util.StartControlPlaneWithGates(t, "--feature-gates=MutatingAdmissionPolicy=true")
		own, other = other, own
	}
	t.Logf("Kubernetes 1.%d: %s applies, %s is refused", minor, own, other)

	if err := util.CreateObjects(tCtx, cp, util.KustomizeBuild(t, other)); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		t.Errorf("%s on a 1.%d API server: %v, want its API version not served", other, minor, err)
	}
	if err := util.CreateObjects(tCtx, cp, util.KustomizeBuild(t, own)); err != nil {
		t.Fatalf("%s on a 1.%d API server: %v", own, minor, err)
	}
	// The switch and the hand-off controller that writes it (manifests/handoff), judging a
	// leader that renews the shipped configuration's Lease.
	const psNS = "pool-scheduler"
	if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: psNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var controllerArgs []string
	for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "handoff")) {
		switch o.GetKind() {
		case "ConfigMap":
			if err := util.CreateObjects(tCtx, cp, []*unstructured.Unstructured{o}); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			controllerArgs = containerArgs(o, map[string]string{"--config": util.ShippedConfigPath()})
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	stopLeader := renewLease(tCtx, t, cp.Client, psNS, "pool-scheduler")
	util.StartProcess(t, util.LabelerBinary(t), append(controllerArgs, "--kubeconfig="+kubeconfig, "--switch-namespace="+psNS,
		"--leader-elect-namespace="+psNS, "--sync-interval=1s", "--metrics-bind-address=0", "--health-probe-bind-address=0")...)
	ns, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "opted-in-", Labels: map[string]string{profile.NamespaceLabel: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The policy takes effect once the API server's admission informers have it.
	i := 0
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		p, err := cp.Client.CoreV1().Pods(ns.Name).Create(ctx, st.MakePod().Name(fmt.Sprintf("probe-%d", i)).Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.SchedulerName == util.SchedulerName && p.Spec.Affinity != nil, nil
	}); err != nil {
		t.Fatalf("%s: no pod of an opted-in namespace got schedulerName %s and the system-node affinity: %v", own, util.SchedulerName, err)
	}
	daemon := st.MakePod().Name("daemon").Container("pause").OwnerReference("ds", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}).Obj()
	daemon.OwnerReferences[0].UID = "5e1f2f2a-0000-4000-8000-000000000001"
	if p, err := cp.Client.CoreV1().Pods(ns.Name).Create(tCtx, daemon, metav1.CreateOptions{}); err != nil || p.Spec.SchedulerName != admission.DefaultSchedulerName || p.Spec.Affinity != nil {
		t.Errorf("a DaemonSet pod was changed (%v): %+v", err, p)
	}
	// pool-scheduler gone: the controller turns the switch off, and new pods keep the default
	// scheduler, still kept off system nodes.
	stopLeader()
	if err := wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		p, err := cp.Client.CoreV1().Pods(ns.Name).Create(ctx, st.MakePod().Name(fmt.Sprintf("probe-%d", i)).Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.SchedulerName == admission.DefaultSchedulerName && p.Spec.Affinity != nil, nil
	}); err != nil {
		t.Fatalf("%s: with no healthy pool-scheduler, pods are still handed over (or lose the system-node affinity): %v", own, err)
	}
}
