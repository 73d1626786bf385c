package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pool-scheduler/pool-scheduler/internal/release"
	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/admission/webhook"
	"github.com/pool-scheduler/pool-scheduler/pkg/certkeeper"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestKustomizeLineOverlayOptsNamespacesIn follows the README's kustomize path on this test
// binary's release line (the default line in make test, 1.36 in make line-test LINE=1.36):
// `kubectl apply -k manifests/overlays/k8s-<line>` (rendered with kustomize's library, every
// object server-side applied to the line's own kube-apiserver), then `kubectl label namespace
// ... pool-scheduler.io/enabled=true`: a pod created there gets schedulerName pool-scheduler,
// and a pod of a namespace left alone keeps the default scheduler. The webhook and its
// certificate keeper run in process with the Deployments' names and configuration (the
// rendered ConfigMap); the webhook configuration is pointed at the process by URL, as there is
// no Service network here, and the hand-off Lease is left out (handed over always: hand-off has
// its own tests).
func TestKustomizeLineOverlayOptsNamespacesIn(t *testing.T) {
	tCtx := ktesting.Init(t)
	line := version.KubernetesLine()
	dir := filepath.Join(util.RepoRoot(), release.LineOverlay(line))
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy // namespaces and CRDs first, as kubectl applies them
	resmap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s (the overlay of line %s): %v", dir, line, err)
	}
	rendered, err := resmap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := util.DecodeObjects(string(rendered))
	if err != nil {
		t.Fatal(err)
	}
	find := func(kind, namePrefix string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind && strings.HasPrefix(o.GetName(), namePrefix) {
				return o
			}
		}
		t.Fatalf("%s renders no %s %s*", dir, kind, namePrefix)
		return nil
	}
	args := func(deploy *unstructured.Unstructured) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, a := range containerArgs(t, deploy) {
			k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			out[k] = v
		}
		return out
	}
	webhookArgs := args(find("Deployment", "pool-scheduler-webhook"))
	certArgs := args(find("Deployment", "pool-scheduler-certs"))
	namespace := find("Deployment", "pool-scheduler-webhook").GetNamespace()

	port := util.FreePort(t)
	whc := find("MutatingWebhookConfiguration", certArgs["webhook-configuration"])
	hooks, _, _ := unstructured.NestedSlice(whc.Object, "webhooks")
	for i := range hooks {
		h := hooks[i].(map[string]any)
		path, _, _ := unstructured.NestedString(h, "clientConfig", "service", "path")
		if path != admission.WebhookPath {
			t.Fatalf("webhook %v calls path %q, the webhook serves %s", h["name"], path, admission.WebhookPath)
		}
		h["clientConfig"] = map[string]any{"url": fmt.Sprintf("https://localhost:%d%s", port, path)}
	}
	if err := unstructured.SetNestedSlice(whc.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}

	cp := util.StartControlPlane(t)
	mapper, err := util.RESTMapper(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v (an API version line %s's apiserver does not serve?)", gvk, o.GetName(), err, line)
		}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace()).Patch(tCtx, o.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)}); err != nil {
			t.Fatalf("applying %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}

	// The certificate keeper's work (pool-labeler certs): the Secrets filled, the CA injected.
	certDir := t.TempDir()
	keeper, err := certkeeper.NewKeeper(cp.Client, time.Minute, certkeeper.Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", DNSNames: []string{"localhost"},
		CASecret:             types.NamespacedName{Namespace: namespace, Name: certArgs["webhook-tls-ca-secret"]},
		ServingSecret:        types.NamespacedName{Namespace: namespace, Name: certArgs["webhook-tls-secret"]},
		CertDir:              certDir,
		WebhookConfiguration: whc.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if err := keeper.Sync(tCtx); err != nil {
		t.Fatal(err)
	}
	// The webhook (pool-labeler webhook) with the configuration its Deployment mounts.
	configMap := find("ConfigMap", "pool-scheduler-config")
	config, _, _ := unstructured.NestedString(configMap.Object, "data", "config.yaml")
	configPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := webhook.MutatorFromConfig(configPath, webhookArgs["scheduler-name"], true)
	if err != nil {
		t.Fatal(err)
	}
	webhookCtx, stop := context.WithCancel(tCtx)
	done := make(chan error, 1)
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: labeler.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.SetupWithManager(mgr, webhook.Options{Mutator: m, Port: port, CertDir: certDir}); err != nil {
		t.Fatal(err)
	}
	go func() { done <- mgr.Start(webhookCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("webhook: %v", err)
		}
	})

	// The README's next step: kubectl label namespace shop pool-scheduler.io/enabled=true
	shop := util.CreateNamespace(tCtx, t, cp.Client, "shop")
	other := util.CreateNamespace(tCtx, t, cp.Client, "elsewhere")
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, profile.NamespaceLabel)
	if _, err := cp.Client.CoreV1().Namespaces().Patch(tCtx, shop, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForMutation(tCtx, t, cp.Client, shop)
	p, err := cp.Client.CoreV1().Pods(other).Create(tCtx, st.MakePod().Name("left-alone").Container("pause").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.SchedulerName != v1.DefaultSchedulerName {
		t.Errorf("a pod of a namespace without the label got schedulerName %q, want %s", p.Spec.SchedulerName, v1.DefaultSchedulerName)
	}
}
