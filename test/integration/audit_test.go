package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/azurelb"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/poolctl"
	"github.com/pool-scheduler/pool-scheduler/pkg/report"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

func runPoolctl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := poolctl.NewCommand()
	var stdout, stderr bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.Execute()
	return stdout.String(), stderr.String(), err
}

// installShippedConfigMap installs manifests/scheduler/config.yaml as the scheduler's ConfigMap
// (pool-scheduler/pool-scheduler-config), as the chart does.
func installShippedConfigMap(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	data, err := os.ReadFile(util.ShippedConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(ctx, t, cp, "pool-scheduler")
	util.InstallConfigMap(ctx, t, cp.Client, "pool-scheduler", "pool-scheduler-config", map[string]string{"config.yaml": string(data)})
}

// TestAudit seeds a real apiserver with one of each kind of finding and reads it back with
// `poolctl audit`.
func TestAudit(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "audit")
	// The deployed configuration, as the chart and the manifests install it: the audit reads it
	// from the scheduler's ConfigMap, and the set from its labelSetNamespace.
	installShippedConfigMap(tCtx, t, cp)
	util.MustApplyLabelSet(tCtx, t, cp, util.LabelSet("pool-scheduler", "spot", map[string]string{"example.com/lifecycle": "spot"}))

	node := func(name, poolName string, extra map[string]string) {
		labels := map[string]string{"kubernetes.azure.com/agentpool": poolName, "topology.kubernetes.io/zone": "0", updateDomainKey: "0"}
		for k, v := range extra {
			labels[k] = v
		}
		util.CreateNode(tCtx, t, cs, util.Node(name, labels).Obj())
	}
	node("spot-0", "spot", nil) // pool labels missing
	node("system-0", "system", nil)
	node("user-0", "user", nil)
	node("user-1", "user", map[string]string{"topology.kubernetes.io/zone": "1", updateDomainKey: "1"})

	rs, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := func(namespace, name, nodeName string, labels map[string]string, owner *appsv1.ReplicaSet) {
		p := util.Pod(namespace, name).Node(nodeName).Labels(labels).Obj()
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
		}
		util.CreatePod(tCtx, t, cs, p)
	}
	bound(ns, "on-unlabelled", "spot-0", nil, nil)
	bound(ns, "user-on-system", "system-0", map[string]string{"app": "ingress"}, nil)
	bound("kube-system", "addon", "system-0", nil, nil)
	bound(ns, "web-a", "user-0", map[string]string{"app": "web"}, rs)
	bound(ns, "web-b", "user-0", map[string]string{"app": "web"}, rs)

	if _, err := cs.CoreV1().Services(ns).Create(tCtx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress", Annotations: map[string]string{azurelb.LoadBalancerPoolsAnnotation: "user"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "ingress"}, Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(tCtx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "ingress-x", Labels: map[string]string{discoveryv1.LabelServiceName: "ingress"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("system-0"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "-o", "json", "--max-findings", "100")
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, stderr)
	}
	var got report.Report
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("audit -o json is not JSON: %v\n%s", err, stdout)
	}
	expect := func(what string, findings []report.Finding, object, node string) {
		t.Helper()
		for _, f := range findings {
			if strings.HasSuffix(f.Object, object) && f.Node == node {
				return
			}
		}
		t.Errorf("%s: no finding for %s on %q in %+v", what, object, node, findings)
	}
	expect("pods on not-ready nodes", got.PodsOnNotReadyNodes, "/on-unlabelled", "spot-0")
	expect("user pods on system pools", got.UserPodsOnSystemNodes, "/user-on-system", "system-0")
	expect("weak spread", got.WeakSpread, "/replicaset/web", "")
	expect("load balancer mismatch", got.LoadBalancerMismatches, "/ingress", "system-0")
	for _, f := range got.UserPodsOnSystemNodes {
		if strings.HasPrefix(f.Object, "kube-system/") {
			t.Errorf("system pod reported as a user pod: %+v", f)
		}
	}
	if got.NumFindings() != 4 {
		t.Errorf("%d findings, want 4: %+v", got.NumFindings(), got)
	}

	// The table, and the CI exit code.
	table, _, err := runPoolctl(t, "audit", "--kubeconfig", kubeconfig, "--max-findings", "3")
	if err == nil {
		t.Error("4 findings with --max-findings 3 did not fail")
	}
	if !strings.Contains(table, "TOTAL FINDINGS: 4") || !strings.Contains(table, "user-on-system") {
		t.Errorf("table output:\n%s", table)
	}

	// kubectl's connection flags (cli-runtime): --context picks a context of the kubeconfig,
	// --namespace narrows pods, services and endpoint slices to one namespace, and a context's
	// own default namespace does not narrow anything.
	multi := kubeconfigWithContexts(t, kubeconfig, "kube-system")
	for _, tt := range []struct {
		name     string
		args     []string
		findings int
		errText  string
	}{
		{"the current context is unreachable", []string{"--timeout", "5s"}, 0, "cannot reach the cluster at https://127.0.0.1:1"},
		{"--context picks the cluster", []string{"--context", "real"}, 4, ""},
		{"--namespace of the findings", []string{"--context", "real", "--namespace", ns}, 4, ""},
		{"-n of a namespace without findings", []string{"--context", "real", "-n", "kube-system"}, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, err := runPoolctl(t, append([]string{"audit", "--kubeconfig", multi, "-o", "json", "--max-findings", "100"}, tt.args...)...)
			if tt.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("error %v, want one containing %q", err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("audit: %v\n%s", err, stderr)
			}
			var r report.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.NumFindings() != tt.findings {
				t.Errorf("%d findings, want %d: %+v", r.NumFindings(), tt.findings, r)
			}
		})
	}
}

// kubeconfigWithContexts writes a kubeconfig whose current context "broken" names an
// unreachable server, with a second context "real" for the cluster of kubeconfig, whose default
// namespace is namespace.
func kubeconfigWithContexts(t *testing.T, kubeconfig, namespace string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	real := cfg.Contexts[cfg.CurrentContext].DeepCopy()
	real.Namespace = namespace
	cfg.Contexts["real"] = real
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["broken"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: real.AuthInfo}
	cfg.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuditFieldReport is the field report's AKS cluster, read by `poolctl audit` from a real
// apiserver: aks-pool-1-27255451-0 and aks-system-27255451-0 (availability-set VMs), a Basic
// load balancer whose default backend is the system pool's set, and echo-service
// (externalTrafficPolicy Local) whose three pods run on pool-1, where SystemPoolGuard keeps
// them. Without the annotation the audit finds that no endpoint gets traffic and prints the
// report's fix; with that fix applied it finds nothing.
func TestAuditFieldReport(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	ns := util.CreateNamespace(tCtx, t, cs, "echo")
	installShippedConfigMap(tCtx, t, cp)
	for _, pool := range []string{"pool-1", "system"} {
		name := "aks-" + pool + "-27255451-0"
		labels := map[string]string{"kubernetes.azure.com/agentpool": pool, "agentpool": pool, "topology.kubernetes.io/zone": "0"}
		if pool == "system" {
			labels["kubernetes.azure.com/mode"] = "system"
		}
		node := util.Node(name, labels).Obj()
		node.Spec.ProviderID = "azure:///subscriptions/sub/resourceGroups/mc_pipeline_westeurope/providers/Microsoft.Compute/virtualMachines/" + name
		util.CreateNode(tCtx, t, cs, node)
	}
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(tCtx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-deployment-575658b97c"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "echo-pod"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "echo-pod"}}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"5tvfb", "lxn4h", "nmgmn"} {
		p := util.Pod(ns, "echo-deployment-575658b97c-"+suffix).Node("aks-pool-1-27255451-0").Labels(map[string]string{"app": "echo-pod"}).Obj()
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
		util.CreatePod(tCtx, t, cs, p)
	}
	svc, err := cs.CoreV1().Services(ns).Create(tCtx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-service"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "echo-pod"}, Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	audit := func() (report.Report, string) {
		t.Helper()
		args := []string{"audit", "--kubeconfig", kubeconfig, "--azure-load-balancer-sku", "Basic", "--azure-primary-vmset", "system-availabilitySet-27255451", "--max-findings", "100"}
		stdout, stderr, err := runPoolctl(t, append(args, "-o", "json")...)
		if err != nil {
			t.Fatalf("audit: %v\n%s", err, stderr)
		}
		var got report.Report
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("audit -o json is not JSON: %v\n%s", err, stdout)
		}
		table, _, err := runPoolctl(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		return got, table
	}

	const fix = "annotate the Service service.beta.kubernetes.io/azure-load-balancer-mode: pool-1-availabilitySet-27255451"
	got, table := audit()
	if len(got.LoadBalancerMismatches) != 4 {
		t.Fatalf("want 3 endpoints without traffic and the system-only backend, got %+v", got.LoadBalancerMismatches)
	}
	for _, f := range got.LoadBalancerMismatches {
		if f.Object != ns+"/echo-service" || f.Fix != fix {
			t.Errorf("finding %+v, want the fix %q", f, fix)
		}
	}
	if !strings.Contains(table, "fix: "+fix) {
		t.Errorf("the table does not print the fix:\n%s", table)
	}

	// The report's fix.
	svc.Annotations = map[string]string{azurelb.AzureLoadBalancerModeAnnotation: "pool-1-availabilitySet-27255451"}
	if _, err := cs.CoreV1().Services(ns).Update(tCtx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, table = audit()
	if len(got.LoadBalancerMismatches)+len(got.LoadBalancerUndetermined) != 0 || got.NumFindings() != 0 {
		t.Errorf("findings after the fix: %+v %+v\n%s", got.LoadBalancerMismatches, got.LoadBalancerUndetermined, table)
	}
}

func TestAuditConnectionErrors(t *testing.T) {
	dir := t.TempDir()
	_, _, err := runPoolctl(t, "audit", "--kubeconfig", filepath.Join(dir, "missing"))
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runPoolctl(t, "audit", "--kubeconfig", garbage)
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("malformed kubeconfig: %v", err)
	}
	unreachable := filepath.Join(dir, "unreachable")
	if err := controlplane.WriteKubeconfig(&rest.Config{Host: "https://127.0.0.1:1"}, unreachable); err != nil {
		t.Fatal(err)
	}
	_, _, err = runPoolctl(t, "audit", "--kubeconfig", unreachable, "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the cluster at https://127.0.0.1:1") {
		t.Errorf("unreachable server: %v", err)
	}
}
