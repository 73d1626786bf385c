package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/admission/webhook"
	"github.com/pool-scheduler/pool-scheduler/pkg/certkeeper"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// MutatingAdmissionPolicy is beta (off by default) in Kubernetes 1.34: every test apiserver
// enables it as a cluster admin would (util.ControlPlaneFlags).

// shippedMutator is the mutation the shipped scheduler configuration implies.
func shippedMutator(t *testing.T) (*admission.Mutator, profile.Args) {
	t.Helper()
	data, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	args, err := profile.LoadArgs(data, util.SchedulerName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := admission.NewMutator(util.SchedulerName, args.SystemPoolGuard, true)
	if err != nil {
		t.Fatal(err)
	}
	return m, args
}

type admissionCase struct {
	name string
	// enabled: created in the opted-in namespace, else in a namespace without the label.
	enabled bool
	pod     *v1.Pod
	// wantSchedulerName and wantAffinity: whether the admission path changes them.
	wantSchedulerName, wantAffinity bool
}

func admissionCases(m *admission.Mutator) []admissionCase {
	withTerms := st.MakePod().Name("with-terms").Container("pause").
		NodeAffinityIn("disktype", []string{"ssd"}, st.NodeSelectorTypeMatchExpressions).Obj()
	withTerms.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
		withTerms.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms,
		v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}})
	preferred := st.MakePod().Name("preferred").Container("pause").Obj()
	preferred.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
		Weight: 1, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "a", Operator: v1.NodeSelectorOpExists}}},
	}}}}
	podAffinity := st.MakePod().Name("pod-affinity").Container("pause").PodAffinityExists("app", v1.LabelHostname, st.PodAffinityWithRequiredReq).Obj()
	// The apiserver refuses a mirror pod without spec.nodeName.
	mirror := st.MakePod().Name("mirror").Node("n1").Container("pause").Annotation(v1.MirrorPodAnnotationKey, "x").Obj()
	daemon := st.MakePod().Name("daemon").Container("pause").OwnerReference("ds", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}).Obj()
	daemon.OwnerReferences[0].UID = "5e1f2f2a-0000-4000-8000-000000000001"
	prio := st.MakePod().Name("prio").Container("pause").Obj()
	prio.Spec.PriorityClassName = "system-cluster-critical"
	// A term with the keys and operators of the system-node requirements but other values does
	// not keep pods off system nodes: the requirements are still added.
	lookalike := st.MakePod().Name("lookalike").Container("pause").Obj()
	var reqs []v1.NodeSelectorRequirement
	for _, r := range m.AvoidSystem()[0] {
		reqs = append(reqs, v1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: []string{"something-else"}})
	}
	lookalike.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
	return []admissionCase{
		{name: "empty schedulerName", enabled: true, pod: st.MakePod().Name("plain").Container("pause").Obj(), wantSchedulerName: true, wantAffinity: true},
		{name: "default-scheduler", enabled: true, pod: st.MakePod().Name("default").SchedulerName(admission.DefaultSchedulerName).Container("pause").Obj(), wantSchedulerName: true, wantAffinity: true},
		{name: "already ours", enabled: true, pod: st.MakePod().Name("ours").SchedulerName(util.SchedulerName).Container("pause").Obj(), wantAffinity: true},
		{name: "another scheduler", enabled: true, pod: st.MakePod().Name("other").SchedulerName("volcano").Container("pause").Obj()},
		{name: "bound by nodeName", enabled: true, pod: st.MakePod().Name("bound").Node("n1").Container("pause").Obj()},
		{name: "mirror pod", enabled: true, pod: mirror},
		{name: "existing required terms", enabled: true, pod: withTerms, wantSchedulerName: true, wantAffinity: true},
		{name: "preferred affinity only", enabled: true, pod: preferred, wantSchedulerName: true, wantAffinity: true},
		{name: "pod affinity only", enabled: true, pod: podAffinity, wantSchedulerName: true, wantAffinity: true},
		{name: "system toleration", enabled: true, pod: st.MakePod().Name("critical").Container("pause").Toleration("CriticalAddonsOnly").Obj(), wantSchedulerName: true},
		{name: "system priority class", enabled: true, pod: prio, wantSchedulerName: true},
		{name: "daemonset pod: untouched (node agents stay with the default scheduler)", enabled: true, pod: daemon},
		{name: "namespace not opted in", pod: st.MakePod().Name("elsewhere").Container("pause").Obj()},
		{name: "terms with our keys, other values", enabled: true, pod: lookalike, wantSchedulerName: true, wantAffinity: true},
		{name: "opted out by the pod's label", enabled: true, pod: st.MakePod().Name("opted-out").Label(profile.NamespaceLabel, "false").Container("pause").Obj()},
	}
}

// checkAdmission creates every case and checks what changed, and that the change is exactly
// Mutator's (so the policy and the webhook agree with each other and with the Go code).
func checkAdmission(ctx context.Context, t *testing.T, cs kubernetes.Interface, m *admission.Mutator, enabledNS, otherNS string) {
	t.Helper()
	for _, c := range admissionCases(m) {
		t.Run(c.name, func(t *testing.T) {
			pod := c.pod.DeepCopy()
			pod.Namespace = otherNS
			if c.enabled {
				pod.Namespace = enabledNS
			}
			want := pod.DeepCopy()
			if want.Spec.SchedulerName == "" {
				want.Spec.SchedulerName = admission.DefaultSchedulerName // the apiserver's default
			}
			var res admission.Result
			if c.enabled {
				res = m.Mutate(want)
			}
			if res.SchedulerName != c.wantSchedulerName || res.NodeAffinity != c.wantAffinity {
				t.Fatalf("Mutator: schedulerName %v affinity %v, the case wants %v %v", res.SchedulerName, res.NodeAffinity, c.wantSchedulerName, c.wantAffinity)
			}
			got, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating pod: %v", err)
			}
			if got.Spec.SchedulerName != want.Spec.SchedulerName {
				t.Errorf("schedulerName %q, want %q", got.Spec.SchedulerName, want.Spec.SchedulerName)
			}
			if diff := cmp.Diff(want.Spec.Affinity, got.Spec.Affinity); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
		})
	}
}

// createOptedInNamespaces returns a namespace labelled for pool-scheduler and one that is not.
func createOptedInNamespaces(ctx context.Context, t *testing.T, cs kubernetes.Interface) (enabled, other string) {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "opted-in-", Labels: map[string]string{profile.NamespaceLabel: "true"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name, util.CreateNamespace(ctx, t, cs, "not-opted-in")
}

// waitForMutation creates probe pods in ns until one is mutated: admission plugins pick up new
// policies and webhook configurations from informers, a moment after they are created.
func waitForMutation(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	waitForPolicy(ctx, t, cs, ns, func(p *v1.Pod) bool { return p.Spec.SchedulerName == util.SchedulerName })
}

// TestMutatingAdmissionPolicy: the shipped MutatingAdmissionPolicy (rendered from the shipped
// scheduler configuration) sets schedulerName and the system-node affinity on new pods of an
// opted-in namespace and leaves the others alone.
func TestMutatingAdmissionPolicy(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	m, args := shippedMutator(t)
	policy, binding, err := admission.RenderPolicy(admission.PolicyOptions{
		Name: "pool-scheduler", SchedulerName: util.SchedulerName, Guard: args.SystemPoolGuard,
		Namespaces: admission.NamespaceSelector([]string{"kube-system"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Create(tCtx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating policy: %v", err)
	}
	if _, err := cs.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Create(tCtx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating binding: %v", err)
	}
	enabled, other := createOptedInNamespaces(tCtx, t, cs)
	waitForMutation(tCtx, t, cs, enabled)
	checkAdmission(tCtx, t, cs, m, enabled, other)
}

// TestMutatingWebhook: the webhook (pool-labeler webhook's code, in process) with the certificate
// keeper's certificate (it fills the empty Secret and injects the CA into the
// MutatingWebhookConfiguration) mutates exactly as the policy does. Stopped, pods are still
// created (failurePolicy Ignore) and the miss shows in the apiserver's fail-open metric.
func TestMutatingWebhook(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	m, _ := shippedMutator(t)

	ns := util.CreateNamespace(tCtx, t, cs, "pool-scheduler")
	secret := types.NamespacedName{Namespace: ns, Name: "pool-scheduler-webhook-tls"}
	// The chart creates it empty; the certificate keeper fills it.
	if _, err := cs.CoreV1().Secrets(ns).Create(tCtx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := util.FreePort(t)
	url := fmt.Sprintf("https://localhost:%d%s", port, admission.WebhookPath)
	whc := admission.RenderWebhookConfiguration("pool-scheduler-"+ns, util.SchedulerName,
		admissionregistrationv1.WebhookClientConfig{URL: &url}, admission.NamespaceSelector([]string{"kube-system"}))
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(tCtx, whc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The certificate keeper (pool-labeler certs --webhook-dns-name) fills the Secret and the
	// caBundle; certDir stands for the Secret's volume.
	caSecret := types.NamespacedName{Namespace: ns, Name: "pool-scheduler-webhook-ca-key"}
	if _, err := cs.CoreV1().Secrets(ns).Create(tCtx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: caSecret.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	keeper, err := certkeeper.NewKeeper(cs, time.Minute, certkeeper.Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", DNSNames: []string{"localhost"},
		CASecret: caSecret, ServingSecret: secret, CertDir: certDir, WebhookConfiguration: whc.Name})
	if err != nil {
		t.Fatal(err)
	}
	if err := keeper.Sync(tCtx); err != nil {
		t.Fatal(err)
	}

	webhookCtx, stopWebhook := context.WithCancel(tCtx)
	done := make(chan error, 1)
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: labeler.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.SetupWithManager(mgr, webhook.Options{Mutator: m, Port: port, CertDir: certDir}); err != nil {
		t.Fatal(err)
	}
	go func() { done <- mgr.Start(webhookCtx) }()
	t.Cleanup(func() { stopWebhook(); <-done })

	enabled, other := createOptedInNamespaces(tCtx, t, cs)
	waitForMutation(tCtx, t, cs, enabled)
	got, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(tCtx, whc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Errorf("the webhook works but its configuration has no caBundle")
	}
	checkAdmission(tCtx, t, cs, m, enabled, other)

	// Down: the pod is created as it came, and the apiserver counts the miss.
	stopWebhook()
	if err := <-done; err != nil {
		t.Fatalf("webhook: %v", err)
	}
	done <- nil // for the cleanup
	p, err := cs.CoreV1().Pods(enabled).Create(tCtx, st.MakePod().Name("while-down").Container("pause").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("with the webhook down, pod creation failed: %v", err)
	}
	if p.Spec.SchedulerName != admission.DefaultSchedulerName {
		t.Errorf("with the webhook down, schedulerName %q, want the default", p.Spec.SchedulerName)
	}
	if n := failOpenCount(tCtx, t, cs, admission.WebhookName); n < 1 {
		t.Errorf("apiserver_admission_webhook_fail_open_count for %s = %v, want >= 1", admission.WebhookName, n)
	}
	// poolctl audit names the pod, and only it: the mutated pods and the other namespace's are fine.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	installShippedConfigMap(tCtx, t, cp) // the deployed configuration the audit judges by
	stdout, stderr, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "-o", "json", "--max-findings", "100")
	if err != nil {
		t.Fatalf("poolctl audit: %v\n%s", err, stderr)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	// Reported besides: the probes created before the webhook served, and the pod created bound
	// (its creator, not a scheduler, chose the node).
	missed := map[string]bool{}
	for _, f := range r.NotAdmitted {
		missed[f.Object] = true
	}
	if !missed[enabled+"/while-down"] {
		t.Errorf("audit does not report the pod created while the webhook was down: %v", r.NotAdmitted)
	}
	for _, c := range admissionCases(m) {
		if c.enabled && c.wantSchedulerName && missed[enabled+"/"+c.pod.Name] {
			t.Errorf("audit reports %s, which the webhook gave to the scheduler", c.pod.Name)
		}
	}
}

// failOpenCount reads kube-apiserver's count of calls to webhook that failed open.
func failOpenCount(ctx context.Context, t *testing.T, cs kubernetes.Interface, webhook string) float64 {
	t.Helper()
	metrics := util.APIServerMetrics(ctx, t, cs)
	total := 0.0
	for _, s := range metrics["apiserver_admission_webhook_fail_open_count"] {
		if string(s.Metric["name"]) == webhook {
			total += float64(s.Value)
		}
	}
	return total
}

// TestHelmChartAdmission: the chart's admission objects are pkg/admission's, rendered from the
// chart's own scheduler configuration: the MutatingAdmissionPolicy (created on a real
// apiserver and mutating a pod), the webhook configuration, and the cert-manager variant.
func TestHelmChartAdmission(t *testing.T) {
	tCtx := ktesting.Init(t)
	profileArgs := func(t *testing.T, r *renderedChart) (string, profile.Args) {
		t.Helper()
		cfg, err := r.schedulerConfig(t, "pool-scheduler-config")
		if err != nil {
			t.Fatal(err)
		}
		args, err := profile.ArgsFromProfile(&cfg.Profiles[0])
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Profiles[0].SchedulerName, args
	}

	t.Run("policy", func(t *testing.T) {
		r, err := renderChart(t, chartNamespace, `{admission: {mode: policy}, scheduler: {plugins: {systemPoolGuard: {args: {systemNamespaces: [kube-system, monitoring]}}}}}`)
		if err != nil {
			t.Fatal(err)
		}
		name, args := profileArgs(t, r)
		wantPolicy, wantBinding, err := admission.RenderPolicy(admission.PolicyOptions{Name: name, SchedulerName: name,
			Guard: args.SystemPoolGuard, Namespaces: admission.NamespaceSelector([]string{"kube-system", chartNamespace}),
			Switch: &types.NamespacedName{Namespace: chartNamespace, Name: name + "-handoff"}, Spread: admission.DegradedSpread(args.DomainSpread)})
		if err != nil {
			t.Fatal(err)
		}
		policy := &admissionregistrationv1beta1.MutatingAdmissionPolicy{}
		fromUnstructured(t, r.get(t, "MutatingAdmissionPolicy", name), policy)
		if diff := cmp.Diff(wantPolicy.Spec, policy.Spec); diff != "" {
			t.Errorf("chart's policy is not pkg/admission's (-want +got):\n%s", diff)
		}
		binding := &admissionregistrationv1beta1.MutatingAdmissionPolicyBinding{}
		fromUnstructured(t, r.get(t, "MutatingAdmissionPolicyBinding", name), binding)
		if diff := cmp.Diff(wantBinding.Spec, binding.Spec); diff != "" {
			t.Errorf("chart's binding (-want +got):\n%s", diff)
		}

		// Installed on a cluster that serves the API, with the chart's switch turned on (as the
		// hand-off controller does while pool-scheduler runs), it mutates.
		cp := util.StartControlPlane(t)
		if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sw := &v1.ConfigMap{}
		fromUnstructured(t, r.get(t, "ConfigMap", name+"-handoff"), sw)
		if got := sw.Data[handoff.SwitchKey]; got != "false" {
			t.Errorf("the chart's switch starts %q, want false (pods keep the default scheduler until the controller judged)", got)
		}
		sw.Data[handoff.SwitchKey] = "true"
		if _, err := cp.Client.CoreV1().ConfigMaps(chartNamespace).Create(tCtx, sw, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Client.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Create(tCtx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Client.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Create(tCtx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		enabled, _ := createOptedInNamespaces(tCtx, t, cp.Client)
		waitForMutation(tCtx, t, cp.Client, enabled)
	})

	t.Run("webhook", func(t *testing.T) {
		r, err := renderChart(t, chartNamespace, `admission: {namespaces: [team-b, team-a]}`)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := profileArgs(t, r)
		got := &admissionregistrationv1.MutatingWebhookConfiguration{}
		fromUnstructured(t, r.get(t, "MutatingWebhookConfiguration", name), got)
		want := admission.RenderWebhookConfiguration(name, name, admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: chartNamespace, Name: name + "-webhook", Path: ptr.To(admission.WebhookPath), Port: ptr.To[int32](443)}},
			admission.NamespaceSelector([]string{"kube-system", chartNamespace}))
		if len(got.Webhooks) != 2 {
			t.Fatalf("%d webhooks, want the label's and the listed namespaces'", len(got.Webhooks))
		}
		if diff := cmp.Diff(want.Webhooks[0], got.Webhooks[0]); diff != "" {
			t.Errorf("chart's webhook is not pkg/admission's (-want +got):\n%s", diff)
		}
		listed := want.Webhooks[0].DeepCopy()
		listed.Name = "listed-pods.pool-scheduler.io"
		listed.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: v1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}}}}
		if diff := cmp.Diff(*listed, got.Webhooks[1]); diff != "" {
			t.Errorf("listed namespaces' webhook (-want +got):\n%s", diff)
		}
		deploy := r.get(t, "Deployment", name+"-webhook")
		spread, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "topologySpreadConstraints")
		if len(spread) != 1 || fmt.Sprint(spread[0].(map[string]any)["labelSelector"]) != fmt.Sprint(map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/instance": chartRelease, "app.kubernetes.io/name": name + "-webhook"}}) {
			t.Errorf("webhook replicas not spread over nodes by their own labels: %v", spread)
		}
		args := containerArgs(t, deploy)
		for _, a := range []string{"--config=/etc/pool-scheduler/config.yaml", "--scheduler-name=" + name, "--system-node-affinity=true",
			"--cert-rotation=false", "--cert-dir=/tmp/certs"} {
			if !containsString(args, a) {
				t.Errorf("webhook args %v lack %s", args, a)
			}
		}
		// #34: the certificate keeper holds the webhook's CA key; the webhook mounts tls.crt and
		// tls.key of its serving Secret and may read no Secret nor write its configuration.
		keeper := containerArgs(t, r.get(t, "Deployment", name+"-certs"))
		for _, a := range []string{"--webhook-dns-name=" + name + "-webhook." + chartNamespace + ".svc", "--webhook-tls-ca-secret=" + name + "-webhook-ca-key",
			"--webhook-tls-secret=" + name + "-webhook-tls", "--webhook-configuration=" + name} {
			if !containsString(keeper, a) {
				t.Errorf("certificate keeper args %v lack %s", keeper, a)
			}
		}
		volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
		var mounted []string
		for _, v := range volumes {
			if sec, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
				items, _, _ := unstructured.NestedSlice(v.(map[string]any), "secret", "items")
				mounted = append(mounted, fmt.Sprintf("%s %d items", sec, len(items)))
			}
		}
		if want := []string{name + "-webhook-tls 2 items"}; !slices.Equal(mounted, want) {
			t.Errorf("webhook mounts Secrets %v, want %v (tls.crt and tls.key)", mounted, want)
		}
		for _, o := range r.objects {
			if (o.GetKind() == "Role" || o.GetKind() == "ClusterRole") && o.GetName() == name+"-webhook" {
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, rule := range rules {
					if rs := fmt.Sprint(rule.(map[string]any)["resources"]); strings.Contains(rs, "secrets") || strings.Contains(rs, "webhookconfigurations") {
						t.Errorf("%s grants the webhook %v", objectID(o), rule)
					}
				}
			}
		}
		policy := r.get(t, "ValidatingAdmissionPolicy", name+"-webhook-ca-bundle")
		conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
		if got := fmt.Sprint(conds[0].(map[string]any)["expression"]); !strings.Contains(got, "username.endsWith('"+name+"-certs')") {
			t.Errorf("the caBundle policy matches %s, want the certificate keeper", got)
		}
	})

	t.Run("cert-manager", func(t *testing.T) {
		r, err := renderChart(t, chartNamespace, `admission: {webhook: {certManager: {enabled: true, issuerRef: {name: ca, kind: ClusterIssuer}}}}`)
		if err != nil {
			t.Fatal(err)
		}
		ids := strings.Join(r.ids(), "\n")
		for _, id := range []string{"Certificate pool-scheduler/pool-scheduler-webhook", "MutatingWebhookConfiguration pool-scheduler"} {
			if !slices.Contains(r.ids(), id) {
				t.Errorf("rendered objects lack %s:\n%s", id, ids)
			}
		}
		for _, id := range []string{"Secret pool-scheduler/pool-scheduler-webhook-tls", "Role pool-scheduler/pool-scheduler-webhook",
			"Secret pool-scheduler/pool-scheduler-webhook-ca-key", "Deployment pool-scheduler/pool-scheduler-certs"} {
			if slices.Contains(r.ids(), id) {
				t.Errorf("with cert-manager the chart still renders %s (the webhook rotates nothing)", id)
			}
		}
		// Left: the metrics authorization (TokenReviews, SubjectAccessReviews), no webhook configuration write.
		rules, _, _ := unstructured.NestedSlice(r.get(t, "ClusterRole", "pool-scheduler-webhook").Object, "rules")
		for _, rule := range rules {
			if groups := fmt.Sprint(rule.(map[string]any)["apiGroups"]); strings.Contains(groups, "admissionregistration") {
				t.Errorf("with cert-manager the webhook may still write webhook configurations: %v", rule)
			}
		}
		whc := r.get(t, "MutatingWebhookConfiguration", "pool-scheduler")
		if got := whc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "pool-scheduler/pool-scheduler-webhook" {
			t.Errorf("inject-ca-from = %q", got)
		}
		if args := containerArgs(t, r.get(t, "Deployment", "pool-scheduler-webhook")); !containsString(args, "--cert-rotation=false") {
			t.Errorf("webhook args %v: want --cert-rotation=false", args)
		}
	})
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s: %v", objectID(u), err)
	}
}
