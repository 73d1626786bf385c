package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestUninstallHandsBack: `helm uninstall` with pods waiting for pool-scheduler. The chart's
// pre-delete hook (its Job's arguments run through bin/pool-labeler, as the hook's
// ServiceAccount under the hook's RBAC and the hand-off ValidatingAdmissionPolicy) removes the
// webhook configuration first, then hands back the waiting pods a ReplicaSet recreates: their
// replacements keep the default scheduler, which binds them; nothing a controller recreates is
// left Pending for pool-scheduler, and the bare pod is reported and left alone.
func TestUninstallHandsBack(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	const ns = "pool-scheduler"

	// Installed with the webhook; pool-scheduler's leader renews (so pods are handed over) but
	// schedules nothing: the pods wait, as they do behind a busy or broken scheduler.
	w := installWebhook(tCtx, t, cp)
	stopLeader := renewLease(tCtx, t, admin, ns, "pool-scheduler")
	defer stopLeader()
	for i := range 3 {
		util.CreateNode(tCtx, t, admin, util.Node(fmt.Sprintf("user-%d", i), map[string]string{"kubernetes.azure.com/agentpool": "user"}).Obj())
	}
	factory := informers.NewSharedInformerFactory(admin, 0)
	rsc := replicaset.NewReplicaSetController(tCtx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), admin, 100)
	factory.Start(tCtx.Done())
	go rsc.Run(tCtx, 2)
	util.StartSchedulerBinary(t, util.UpstreamConfigFor(t, cp))

	opted, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "team-", Labels: map[string]string{profile.NamespaceLabel: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := opted.Name
	waitForHandOff(tCtx, t, admin, app, util.SchedulerName)
	labels := map[string]string{"app": "web"}
	if _, err := admin.AppsV1().ReplicaSets(app).Create(tCtx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: app},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods(app).Create(tCtx, st.MakePod().Name("bare").Container("pause").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waiting := func(ctx context.Context) (owned, bare int, err error) {
		pods, err := admin.CoreV1().Pods(app).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		for _, p := range pods.Items {
			if p.Spec.SchedulerName != util.SchedulerName || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
				continue
			}
			if metav1.GetControllerOf(&p) != nil {
				owned++
			} else {
				bare++
			}
		}
		return owned, bare, nil
	}
	if err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		owned, _, err := waiting(ctx)
		return owned == 3, err
	}); err != nil {
		t.Fatalf("the ReplicaSet's pods do not wait for pool-scheduler: %v", err)
	}

	// The chart's pre-delete hook, as rendered for this release.
	objs, _, err := util.RenderChart("v1.34.10", "pool-scheduler", ns, "")
	if err != nil {
		t.Fatal(err)
	}
	var access []*unstructured.Unstructured
	var job *unstructured.Unstructured
	for _, o := range objs {
		hook := o.GetAnnotations()["helm.sh/hook"] == "pre-delete"
		switch {
		case hook && o.GetKind() == "Job":
			job = o
		case hook:
			access = append(access, o)
		case strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && strings.HasPrefix(o.GetName(), "pool-scheduler-handoff"):
			access = append(access, o)
		}
	}
	if job == nil || len(access) != 5 {
		t.Fatalf("the chart's pre-delete hook: Job %v, %d access objects (want its ServiceAccount, ClusterRole, ClusterRoleBinding and the hand-off policy and binding)", job != nil, len(access))
	}
	util.ApplyAccessObjects(tCtx, t, cp, access)
	_, kubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler-handback", nil)
	args := containerArgs(job, nil)
	// RBAC may take a moment to reach the authorizer's cache: the hook retries its hand-back
	// until --timeout, as the Job would.
	hook := util.StartProcess(t, util.LabelerBinary(t), append(args, "--kubeconfig="+kubeconfig, "--settle=3s", "-v=2")...)
	exited, err := hook.Wait(3 * time.Minute)
	if !exited || err != nil {
		t.Fatalf("the hook did not finish cleanly (exited %v): %v\n%s", exited, err, hook.Output())
	}

	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(tCtx, w.config.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook configuration is still there after the hook: %v", err)
	}
	owned, bare, err := waiting(tCtx)
	if err != nil {
		t.Fatal(err)
	}
	if owned != 0 {
		t.Errorf("%d ReplicaSet pods still wait for pool-scheduler after the hook\n%s", owned, hook.Output())
	}
	if bare != 1 || !strings.Contains(hook.Output(), "bare") {
		t.Errorf("the bare pod: %d waiting (want 1, reported, not deleted); hook output:\n%s", bare, hook.Output())
	}
	// Their replacements are the default scheduler's, and it binds them.
	util.WaitForPods(tCtx, t, admin, app, time.Minute, func(pods []v1.Pod) (bool, error) {
		bound := 0
		for _, p := range pods {
			if p.Labels["app"] == "web" && p.Spec.NodeName != "" && p.Spec.SchedulerName == admission.DefaultSchedulerName {
				bound++
			}
		}
		return bound == 3, nil
	})
}
