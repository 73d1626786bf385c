package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/certkeeper"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// BenchmarkHandoffToDefault reports how long after pool-scheduler's leader last renewed its
// Lease the webhook (bin/pool-labeler webhook with the shipped configuration) leaves the first
// new pod with the default scheduler: the lease duration (15 s) plus the webhook's reaction. A
// measurement (s-lease-to-default), never a bound: make e2e prints it, docs/operations.md
// quotes it.
func BenchmarkHandoffToDefault(b *testing.B) {
	for range b.N {
		b.StopTimer()
		measureHandoffToDefault(b)
	}
}

func measureHandoffToDefault(b *testing.B) {
	tCtx := ktesting.Init(b)
	cp := util.StartControlPlane(b)
	admin := cp.Client
	const ns = "pool-scheduler"
	if _, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(ns).Create(tCtx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler-webhook-tls"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	port := util.FreePort(b)
	url := fmt.Sprintf("https://localhost:%d%s", port, admission.WebhookPath)
	whc := admission.RenderWebhookConfiguration("pool-scheduler", util.SchedulerName, admissionregistrationv1.WebhookClientConfig{URL: &url},
		admission.NamespaceSelector([]string{"kube-system", ns}))
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(tCtx, whc, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		b.Fatal(err)
	}
	// The certificate keeper (pool-labeler certs --webhook-dns-name) fills the Secret and the
	// caBundle; certDir stands for the Secret's volume.
	if _, err := admin.CoreV1().Secrets(ns).Create(tCtx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler-webhook-ca-key"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	certDir := b.TempDir()
	keeper, err := certkeeper.NewKeeper(admin, time.Minute, certkeeper.Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", DNSNames: []string{"localhost"},
		CASecret:      types.NamespacedName{Namespace: ns, Name: "pool-scheduler-webhook-ca-key"},
		ServingSecret: types.NamespacedName{Namespace: ns, Name: "pool-scheduler-webhook-tls"}, CertDir: certDir, WebhookConfiguration: whc.Name})
	if err != nil {
		b.Fatal(err)
	}
	if err := keeper.Sync(tCtx); err != nil {
		b.Fatal(err)
	}
	stop := renewLease(tCtx, b, admin, ns, "pool-scheduler")
	util.StartProcess(b, util.LabelerBinary(b), "webhook", "--config="+util.ShippedConfigPath(), "--kubeconfig="+kubeconfig,
		"--cert-dir="+certDir, fmt.Sprintf("--port=%d", port),
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	opted, err := admin.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "team-", Labels: map[string]string{profile.NamespaceLabel: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	waitForHandOff(tCtx, b, admin, opted.Name, util.SchedulerName)
	stop()
	lease, err := admin.CoordinationV1().Leases(ns).Get(tCtx, "pool-scheduler", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	at := waitForHandOff(context.Background(), b, admin, opted.Name, admission.DefaultSchedulerName)
	b.StopTimer()
	b.ReportMetric(at.Sub(lease.Spec.RenewTime.Time).Seconds(), "s-lease-to-default")
}
