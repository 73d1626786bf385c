package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestPoolctlHandback: `poolctl handback` deletes only the pending pods that wait for
// pool-scheduler, that admission handed over and that a recreating controller owns; a bare pod,
// a pod of an unknown controller and one whose template names pool-scheduler are reported, a
// gated pod is left alone, a bound pod and another scheduler's pod are never touched; it needs
// -n or -A, and deletes nothing unless --dry-run=none.
func TestPoolctlHandback(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "shop")
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(p *v1.Pod, gvk schema.GroupVersionKind, name string, uid string) *v1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
		return p
	}
	rsKind := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	handedOver := func(p *v1.Pod) *v1.Pod {
		p.Annotations = map[string]string{profile.HandedOverAnnotation: p.Spec.SchedulerName}
		return p
	}
	util.CreatePod(tCtx, t, cs, handedOver(owned(util.Pod(ns, "web-1").Obj(), rsKind, rs.Name, string(rs.UID))))
	// Its template names pool-scheduler (no admission handed it over): a replacement would wait
	// again, so it is only reported.
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "web-template").Obj(), rsKind, rs.Name, string(rs.UID)))
	// Gated (Kueue): not waiting for the scheduler; neither listed nor handed back.
	util.CreatePod(tCtx, t, cs, handedOver(owned(util.Pod(ns, "web-gated").SchedulingGates([]string{"kueue.x-k8s.io/admission"}).Obj(), rsKind, rs.Name, string(rs.UID))))
	util.CreatePod(tCtx, t, cs, util.Pod(ns, "bare").Obj())
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "custom-1").Obj(), schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "w", "0a0a0a0a-0000-4000-8000-000000000001"))
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "web-bound").Node("n1").Obj(), rsKind, rs.Name, string(rs.UID)))
	util.CreatePod(tCtx, t, cs, owned(util.Pod(ns, "web-default").SchedulerName(v1.DefaultSchedulerName).Obj(), rsKind, rs.Name, string(rs.UID)))

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) []handoff.Result {
		t.Helper()
		stdout, stderr, err := runPoolctl(t, append([]string{"handback", "--kubeconfig", kubeconfig, "-o", "json", "--rate", "100"}, args...)...)
		if err != nil {
			t.Fatalf("handback: %v\n%s", err, stderr)
		}
		var r []handoff.Result
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		return r
	}
	actions := func(rs []handoff.Result) map[string]string {
		out := map[string]string{}
		for _, r := range rs {
			out[r.Pod] = r.Action
		}
		return out
	}
	// Neither -n nor -A: refused, naming both; the kubeconfig's namespace is never assumed.
	if _, _, err := runPoolctl(t, "handback", "--kubeconfig", kubeconfig, "--dry-run=none"); err == nil ||
		!strings.Contains(err.Error(), "--namespace/-n") || !strings.Contains(err.Error(), "--all-namespaces/-A") {
		t.Errorf("handback without a namespace: %v, want an error naming --namespace/-n and --all-namespaces/-A", err)
	}
	want := map[string]string{ns + "/bare": "reported", ns + "/custom-1": "reported", ns + "/web-1": "would hand back", ns + "/web-template": "reported"}
	// The default is a dry run; a bare --dry-run is kubectl's client dry run.
	for _, args := range [][]string{{"-A"}, {"-n", ns, "--dry-run"}} {
		if diff := cmp.Diff(want, actions(run(t, args...))); diff != "" {
			t.Errorf("%v (-want +got):\n%s", args, diff)
		}
		if _, err := cs.CoreV1().Pods(ns).Get(tCtx, "web-1", metav1.GetOptions{}); err != nil {
			t.Fatalf("%v deleted web-1: %v", args, err)
		}
	}
	// No admission path: the replacements get the default scheduler, so it deletes.
	want[ns+"/web-1"] = "handed back"
	if diff := cmp.Diff(want, actions(run(t, "-n", ns, "--dry-run=none"))); diff != "" {
		t.Errorf("handback (-want +got):\n%s", diff)
	}
	for name, wantGone := range map[string]bool{"web-1": true, "web-template": false, "web-gated": false, "bare": false, "custom-1": false, "web-bound": false, "web-default": false} {
		_, err := cs.CoreV1().Pods(ns).Get(tCtx, name, metav1.GetOptions{})
		if gone := apierrors.IsNotFound(err); gone != wantGone {
			t.Errorf("pod %s: gone %v (%v), want %v", name, gone, err, wantGone)
		}
	}
}

// TestPoolctlHandbackAdmissionPath: `poolctl handback --dry-run=none` deletes only where the
// admission path leaves the replacements to the default scheduler. It refuses, naming what hands
// them over and --force, while the MutatingWebhookConfiguration's service has a ready endpoint
// and pool-scheduler's leader renews its Lease, and while the MutatingAdmissionPolicyBinding's
// switch is on; it deletes with --force, with the webhook's service without a ready endpoint
// (failurePolicy Ignore: pods are created unchanged) and with the policy's switch off. -n keeps
// it to that namespace.
func TestPoolctlHandbackAdmissionPath(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ensureNamespace(tCtx, t, cp, "pool-scheduler")
	rsKind := appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	// waiting creates, in a namespace of its own, one pod admission handed over, of a ReplicaSet.
	waiting := func(name string) string {
		ns := util.CreateNamespace(tCtx, t, cs, name)
		p := util.Pod(ns, "web-1").Obj()
		p.Annotations = map[string]string{profile.HandedOverAnnotation: p.Spec.SchedulerName}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: rsKind.GroupVersion().String(), Kind: rsKind.Kind, Name: "web", UID: "0a0a0a0a-0000-4000-8000-000000000002", Controller: ptr.To(true)}}
		util.CreatePod(tCtx, t, cs, p)
		return ns
	}
	refused, forced, failOpen, policyOn, policyOff := waiting("refused"), waiting("forced"), waiting("fail-open"), waiting("policy-on"), waiting("policy-off")

	// The webhook way in, as shipped: its configuration (an objectSelector no test pod matches,
	// so kube-apiserver never calls it here), a ready endpoint of its service, and a leader that
	// renews the Lease.
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(tCtx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.pool-scheduler.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "pool-scheduler", Name: "pool-scheduler-webhook", Path: ptr.To("/mutate")}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matched"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice, err := cs.DiscoveryV1().EndpointSlices("pool-scheduler").Create(tCtx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "pool-scheduler-webhook-1", Labels: map[string]string{discoveryv1.LabelServiceName: "pool-scheduler-webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renew := func() {
		t.Helper()
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler", Namespace: "pool-scheduler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pool-scheduler-0"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
		old, err := cs.CoordinationV1().Leases("pool-scheduler").Get(tCtx, lease.Name, metav1.GetOptions{})
		if err == nil {
			old.Spec = lease.Spec
			_, err = cs.CoordinationV1().Leases("pool-scheduler").Update(tCtx, old, metav1.UpdateOptions{})
		} else {
			_, err = cs.CoordinationV1().Leases("pool-scheduler").Create(tCtx, lease, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	handback := func(args ...string) (string, error) {
		stdout, stderr, err := runPoolctl(t, append([]string{"handback", "--kubeconfig", kubeconfig, "--rate", "100"}, args...)...)
		return stdout + stderr, err
	}
	exists := func(ns string) bool {
		t.Helper()
		_, err := cs.CoreV1().Pods(ns).Get(tCtx, "web-1", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	check := func(step string, want map[string]bool) {
		t.Helper()
		got := map[string]bool{}
		for ns := range want {
			got[ns] = exists(ns)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: pods left (-want +got):\n%s", step, diff)
		}
	}

	renew()
	out, err := handback("-n", refused)
	if err != nil || !strings.Contains(out, "Would refuse --dry-run=none") || !strings.Contains(out, "would hand back") {
		t.Errorf("dry run with the webhook handing over: %v, want the pod listed and the refusal foretold:\n%s", err, out)
	}
	renew()
	out, err = handback("-n", refused, "--dry-run=none")
	if err == nil || !strings.Contains(err.Error(), "refusing to delete") || !strings.Contains(err.Error(), "leader is healthy") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("--dry-run=none with the webhook handing over: %v, want a refusal naming the healthy leader and --force\n%s", err, out)
	}
	check("refused", map[string]bool{refused: true, forced: true})

	renew()
	if out, err := handback("-n", forced, "--dry-run=none", "--force"); err != nil || !strings.Contains(out, "Forced (--force) past") {
		t.Errorf("--force: %v\n%s", err, out)
	}
	check("forced", map[string]bool{refused: true, forced: false, failOpen: true})

	// No ready endpoint: kube-apiserver creates the replacements unchanged (failurePolicy Ignore).
	slice.Endpoints[0].Conditions.Ready = ptr.To(false)
	if _, err := cs.DiscoveryV1().EndpointSlices("pool-scheduler").Update(tCtx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	renew()
	if out, err := handback("-n", failOpen, "--dry-run=none"); err != nil || !strings.Contains(out, "no ready endpoint") {
		t.Errorf("the webhook without a ready endpoint: %v, want the pod handed back\n%s", err, out)
	}
	check("webhook without endpoints", map[string]bool{refused: true, failOpen: false})

	// The policy way in: it follows its switch.
	if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(tCtx, mwc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Create(tCtx, &admissionregistrationv1beta1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"},
		Spec: admissionregistrationv1beta1.MutatingAdmissionPolicyBindingSpec{PolicyName: "pool-scheduler",
			ParamRef: &admissionregistrationv1beta1.ParamRef{Name: "pool-scheduler-handoff", Namespace: "pool-scheduler", ParameterNotFoundAction: ptr.To(admissionregistrationv1beta1.AllowAction)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	util.InstallConfigMap(tCtx, t, cs, "pool-scheduler", "pool-scheduler-handoff", map[string]string{handoff.SwitchKey: "true"})
	out, err = handback("-n", policyOn, "--dry-run=none")
	if err == nil || !strings.Contains(err.Error(), "MutatingAdmissionPolicyBinding pool-scheduler: its switch pool-scheduler/pool-scheduler-handoff is on") {
		t.Errorf("--dry-run=none with the policy's switch on: %v, want a refusal naming the binding and its switch\n%s", err, out)
	}
	check("policy switch on", map[string]bool{policyOn: true})
	if _, err := cs.CoreV1().ConfigMaps("pool-scheduler").Update(tCtx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: "pool-scheduler-handoff"},
		Data: map[string]string{handoff.SwitchKey: "false", handoff.SwitchReasonKey: "no Lease"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	renew() // the webhook is gone: the leader's health no longer matters
	if out, err := handback("-n", policyOff, "--dry-run=none"); err != nil {
		t.Errorf("the policy's switch off: %v\n%s", err, out)
	}
	check("policy switch off", map[string]bool{refused: true, policyOn: true, policyOff: false})
}
