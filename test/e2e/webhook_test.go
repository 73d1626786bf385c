package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestWebhookAsInstalled runs bin/pool-labeler webhook as manifests/admission/webhook installs
// it: its Deployment's arguments (the shipped scheduler configuration), its ServiceAccount's
// token under the RBAC authorizer with exactly the shipped RBAC, the shipped empty Secret and
// webhook configuration (pointed at the process by URL, as there is no Service network here).
// It fills the Secret, injects the CA, mutates pods of a labelled namespace; writes outside its
// role are refused.
func TestWebhookAsInstalled(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t, "--authorization-mode=Node,RBAC")
	admin := cp.Client
	const ns = "pool-scheduler"
	w := installWebhook(tCtx, t, cp)
	proc, sa, cfg, s := w.proc, w.sa, w.config, w.secret
	// pool-scheduler's leader, as far as the webhook can tell: the shipped configuration's Lease,
	// renewed as kube-scheduler renews it (every retryPeriod, 2 s) until stopLeader.
	stopLeader := renewLease(tCtx, t, admin, ns, "pool-scheduler")

	opted, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "team-", Labels: map[string]string{profile.NamespaceLabel: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod *v1.Pod
	i := 0
	err = wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		p, err := admin.CoreV1().Pods(opted.Name).Create(ctx, st.MakePod().Name(fmt.Sprintf("web-%d", i)).Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.SchedulerName == "pool-scheduler", nil
	})
	if err != nil {
		t.Fatalf("no pod in the labelled namespace got schedulerName pool-scheduler: %v\n%s", err, proc.Output())
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("mutated pod has no required node affinity: %+v", pod.Spec.Affinity)
	}
	// The apiserver just called it: HTTP/1.1 only (internal/tlsserving).
	util.RequireNoHTTP2(t, w.addr)
	// The leader stops renewing (every replica down): once the lease duration (15 s) has passed,
	// new pods keep the default scheduler and still get the system-node affinity.
	stopLeader()
	err = wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		p, err := admin.CoreV1().Pods(opted.Name).Create(ctx, st.MakePod().Name(fmt.Sprintf("web-%d", i)).Container("pause").Obj(), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.SchedulerName == admission.DefaultSchedulerName, nil
	})
	if err != nil {
		t.Fatalf("with no healthy leader, pods still go to pool-scheduler: %v\n%s", err, proc.Output())
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("a pod left with the default scheduler has no required node affinity: %+v", pod.Spec.Affinity)
	}
	// The leader back: pods are handed over again.
	stopLeader = renewLease(tCtx, t, admin, ns, "pool-scheduler")
	defer stopLeader()
	err = wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		i++
		p, err := admin.CoreV1().Pods(opted.Name).Create(ctx, st.MakePod().Name(fmt.Sprintf("web-%d", i)).Container("pause").Obj(), metav1.CreateOptions{})
		return err == nil && p.Spec.SchedulerName == util.SchedulerName, err
	})
	if err != nil {
		t.Fatalf("the leader back, pods are not handed over again: %v\n%s", err, proc.Output())
	}
	filled, err := admin.CoreV1().Secrets(ns).Get(tCtx, s.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(filled.Data[k]) == 0 {
			t.Errorf("the certificate keeper did not fill %s in Secret %s", k, s.Name)
		}
	}
	if filled.Data["ca.key"] != nil {
		t.Errorf("Secret %s, which the webhook mounts, holds the CA key", s.Name)
	}
	for name, p := range map[string]*util.SchedulerProcess{"webhook": proc, "certificate keeper": w.keeper} {
		if forbidden.MatchString(p.Output()) {
			t.Errorf("the %s was refused a request it needs:\n%s", name, p.Output())
		}
	}

	// Refused: another webhook configuration, another Secret, Secrets elsewhere, pods.
	other := cfg.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Name: "someone-elses"}
	other.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"nothing": "matches"}}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(tCtx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	theirs, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(tCtx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirs.Webhooks[0].ClientConfig.CABundle = []byte("x")
	_, errOtherWebhook := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(tCtx, theirs, metav1.UpdateOptions{})
	_, errCreateWebhook := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(tCtx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	util.CreateNamespace(tCtx, t, admin, "elsewhere")
	_, errSecretsElsewhere := sa.CoreV1().Secrets("kube-system").List(tCtx, metav1.ListOptions{})
	// Nor the other Secrets of its own namespace (the chart's release and metrics secrets live there).
	if _, err := admin.CoreV1().Secrets(ns).Create(tCtx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "neighbour"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, errNeighbour := sa.CoreV1().Secrets(ns).Get(tCtx, "neighbour", metav1.GetOptions{})
	_, errListOwn := sa.CoreV1().Secrets(ns).List(tCtx, metav1.ListOptions{})
	_, errOtherWebhookRead := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(tCtx, other.Name, metav1.GetOptions{})
	_, errOtherSecret := sa.CoreV1().Secrets(ns).Create(tCtx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}, metav1.CreateOptions{})
	_, errPods := sa.CoreV1().Pods(opted.Name).Create(tCtx, st.MakePod().Name("sa-pod").Container("pause").Obj(), metav1.CreateOptions{})
	// #34: nor its own Secrets (the kubelet mounts its certificate), nor its configuration.
	_, errOwnSecret := sa.CoreV1().Secrets(ns).Get(tCtx, s.Name, metav1.GetOptions{})
	_, errCAKey := sa.CoreV1().Secrets(ns).Get(tCtx, "pool-scheduler-webhook-ca-key", metav1.GetOptions{})
	_, errOwnConfig := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(tCtx, cfg.Name, metav1.GetOptions{})
	for name, err := range map[string]error{
		"get its serving Secret":                      errOwnSecret,
		"get the CA Secret":                           errCAKey,
		"get its own webhook configuration":           errOwnConfig,
		"update another MutatingWebhookConfiguration": errOtherWebhook,
		"create a MutatingWebhookConfiguration":       errCreateWebhook,
		"list Secrets in kube-system":                 errSecretsElsewhere,
		"get another Secret of its namespace":         errNeighbour,
		"list its namespace's Secrets (no name)":      errListOwn,
		"get another webhook configuration":           errOtherWebhookRead,
		"create a Secret in its namespace":            errOtherSecret,
		"create a pod":                                errPods,
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", name, err)
		}
	}
}

// renewLease holds the Lease namespace/name for a leader and renews it every 2 s, as
// kube-scheduler's leader does, until the returned func is called.
func renewLease(ctx context.Context, t testing.TB, cs kubernetes.Interface, namespace, name string) (stop func()) {
	t.Helper()
	renew := func(ctx context.Context) error {
		now := metav1.NowMicro()
		l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cs.CoordinationV1().Leases(namespace).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("test-leader"), LeaseDurationSeconds: ptr.To[int32](15),
					AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
			return err
		} else if err != nil {
			return err
		}
		l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To("test-leader"), &now
		_, err = cs.CoordinationV1().Leases(namespace).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	if err := renew(ctx); err != nil {
		t.Fatalf("holding the Lease %s/%s: %v", namespace, name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
				if err := renew(ctx); err != nil && ctx.Err() == nil {
					t.Logf("renewing the Lease %s/%s: %v", namespace, name, err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// installedWebhook is pool-labeler webhook as manifests/admission/webhook installs it.
type installedWebhook struct {
	proc   *util.SchedulerProcess
	keeper *util.SchedulerProcess // pool-labeler certs, which keeps the webhook's certificate
	addr   string                 // host:port of the webhook server
	sa     kubernetes.Interface
	config admissionregistrationv1.MutatingWebhookConfiguration
	secret v1.Secret
}

// installWebhook applies manifests/admission/webhook's RBAC, Secret and MutatingWebhookConfiguration
// (pointed at a local port) and the scheduler's namespace and RBAC on cp, and runs bin/pool-labeler
// with the Deployment's arguments as its ServiceAccount.
func installWebhook(tCtx context.Context, t *testing.T, cp *controlplane.ControlPlane) installedWebhook {
	t.Helper()
	return installWebhookWith(tCtx, t, cp, nil)
}

// installWebhookWith is installWebhook with the webhook's arguments taken from webhook (another
// install's Deployment of it, the chart's), when not nil, instead of manifests/admission/webhook's.
func installWebhookWith(tCtx context.Context, t *testing.T, cp *controlplane.ControlPlane, webhook *unstructured.Unstructured) installedWebhook {
	t.Helper()
	admin := cp.Client
	const ns = "pool-scheduler"

	var access []*unstructured.Unstructured
	var deployment, keeperDeployment, whc *unstructured.Unstructured
	var secrets []v1.Secret
	for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "admission", "webhook")) {
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == "pool-scheduler-webhook":
			deployment = o
		case o.GetKind() == "Deployment" && o.GetName() == "pool-scheduler-certs":
			keeperDeployment = o
		case o.GetKind() == "Secret":
			var s v1.Secret
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
				t.Fatal(err)
			}
			secrets = append(secrets, s)
		case o.GetKind() == "MutatingWebhookConfiguration":
			whc = o
		case o.GetKind() == "Service":
		default:
			access = append(access, o)
		}
	}
	if deployment == nil || keeperDeployment == nil || len(secrets) != 2 || whc == nil {
		t.Fatalf("manifests/admission/webhook lacks the Deployments, the two Secrets or the MutatingWebhookConfiguration")
	}
	util.ApplyAccessObjects(tCtx, t, cp, access)
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(whc.Object, &cfg); err != nil {
		t.Fatal(err)
	}
	var s v1.Secret
	for i := range secrets {
		if _, err := admin.CoreV1().Secrets(ns).Create(tCtx, &secrets[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if secrets[i].Name == "pool-scheduler-webhook-tls" {
			s = secrets[i]
		}
	}
	port := util.FreePort(t)
	url := fmt.Sprintf("https://localhost:%d%s", port, admission.WebhookPath)
	cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(tCtx, &cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The certificate keeper (#34): it alone reads the webhook's CA key; it writes the serving
	// certificate (for localhost, the URL's host, instead of the Service's name) and the caBundle.
	keeperCfg, keeperKubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler-certs", nil)
	waitAllowed(tCtx, t, clientFor(t, keeperCfg), "pool-scheduler-certs", []authorizationv1.ResourceAttributes{
		{Verb: "update", Resource: "secrets", Namespace: ns, Name: s.Name},
		{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: cfg.Name},
	})
	keeperArgs := append(containerArgs(keeperDeployment, map[string]string{"--webhook-dns-name": "localhost"}),
		"--kubeconfig="+keeperKubeconfig, "--namespace="+ns, "--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	keeper := util.StartProcess(t, util.LabelerBinary(t), keeperArgs...)
	// What the kubelet does for the webhook's pod: it waits for tls.crt and tls.key and mounts them.
	certDir := t.TempDir()
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := admin.CoreV1().Secrets(ns).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil || len(got.Data["tls.crt"]) == 0 {
			return false, nil
		}
		for _, k := range []string{"tls.crt", "tls.key"} {
			if err := os.WriteFile(filepath.Join(certDir, k), got.Data[k], 0o600); err != nil {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the certificate keeper did not write %s: %v\n%s", s.Name, err, keeper.Output())
	}

	saCfg, kubeconfig := util.ServiceAccountConfig(tCtx, t, cp, ns, "pool-scheduler-webhook", nil)
	sa := clientFor(t, saCfg)
	waitAllowed(tCtx, t, sa, "pool-scheduler-webhook", []authorizationv1.ResourceAttributes{
		{Verb: "watch", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "pool-scheduler"},
		// The hand-off controller's switch: whether the leader schedules, as it judges.
		{Verb: "watch", Resource: "configmaps", Namespace: ns, Name: handoff.SwitchConfigMap},
	})
	if webhook != nil {
		deployment = webhook
	}
	// The Deployment's arguments, with what a pod has and a process here does not.
	webhookArgs := containerArgs(deployment, map[string]string{
		"--config":   util.ShippedConfigPath(), // the ConfigMap's file
		"--cert-dir": certDir,                  // the Secret's volume
	})
	webhookArgs = append(webhookArgs, "--kubeconfig="+kubeconfig, fmt.Sprintf("--port=%d", port), "--handoff-switch-namespace="+ns,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "-v=2")
	return installedWebhook{proc: util.StartProcess(t, util.LabelerBinary(t), webhookArgs...), keeper: keeper, addr: fmt.Sprintf("localhost:%d", port), sa: sa, config: cfg, secret: s}
}
