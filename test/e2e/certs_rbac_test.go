package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// checkCertKeeper installs the chart's certificate keeper as rendered with ServiceMonitors (its
// ServiceAccount and RBAC exactly, its two Secrets empty) and runs bin/pool-labeler certs with
// the rendered arguments and a token of its ServiceAccount (issue #34). It writes the CA and its
// key to the CA Secret and only the serving certificate, its key and the CA bundle to the serving
// Secret, and serves its own /metrics with the certificate it keeps. It is refused every other
// Secret; the identities whose pods serve /metrics (the scheduler, the labeler, the spread
// keeper, the webhook) are refused the CA Secret (the kubelet mounts their serving Secret).
// Call it after the spread keeper's and the webhook's ServiceAccounts exist, and after
// checkMetricsAuth (its monitoring/prometheus may get /metrics).
func checkCertKeeper(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	admin := cp.Client
	const (
		ns      = "pool-scheduler"
		keeper  = "pool-scheduler-certs"
		caKey   = "pool-scheduler-metrics-ca-key"
		serving = "pool-scheduler-metrics-serving"
	)
	objs, _, err := util.RenderChart("v1.34.10", "pool-scheduler", ns, `monitoring: {serviceMonitor: {enabled: true}}`)
	if err != nil {
		t.Fatal(err)
	}
	var access []*unstructured.Unstructured
	var args []string
	for _, o := range objs {
		switch {
		case o.GetName() == keeper && o.GetKind() == "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, a := range containers[0].(map[string]any)["args"].([]any) {
				if !strings.HasPrefix(a.(string), "--metrics-cert-dir=") {
					args = append(args, a.(string))
				}
			}
		case o.GetName() == keeper && o.GetKind() != "Service" && o.GetKind() != "ServiceMonitor":
			access = append(access, o)
		case o.GetKind() == "Secret" && (o.GetName() == caKey || o.GetName() == serving ||
			o.GetName() == "pool-scheduler-webhook-ca-key" || o.GetName() == "pool-scheduler-webhook-tls"):
			sec := &v1.Secret{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, sec); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the chart's Secret %s: %v", sec.Name, err)
			}
		}
	}
	// manifests/admission/webhook installed the keeper with the webhook's rights only: the chart's
	// (the webhook's and the metrics certificate's) replaces them.
	_ = admin.RbacV1().Roles(ns).Delete(ctx, keeper, metav1.DeleteOptions{})
	_ = admin.RbacV1().RoleBindings(ns).Delete(ctx, keeper, metav1.DeleteOptions{})
	_ = admin.RbacV1().ClusterRoles().Delete(ctx, keeper, metav1.DeleteOptions{})
	_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, keeper, metav1.DeleteOptions{})
	if _, err := admin.CoreV1().ServiceAccounts(ns).Get(ctx, keeper, metav1.GetOptions{}); err == nil {
		access = slices.DeleteFunc(access, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceAccount" })
	}
	t.Logf("applied from the chart's certificate keeper: %v", util.ApplyAccessObjects(ctx, t, cp, access))
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keeperCfg, keeperKubeconfig := util.ServiceAccountConfig(ctx, t, cp, ns, keeper, nil)
	kc := clientFor(t, keeperCfg)
	waitAllowed(ctx, t, kc, keeper, []authorizationv1.ResourceAttributes{
		{Verb: "update", Resource: "secrets", Namespace: ns, Name: caKey},
		{Verb: "update", Resource: "secrets", Namespace: ns, Name: serving},
	})
	port := util.FreePort(t)
	proc := util.StartProcess(t, util.LabelerBinary(t), append(args, "--kubeconfig="+keeperKubeconfig, "--namespace="+ns, "--metrics-cert-dir="+t.TempDir(),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--health-probe-bind-address=0")...)

	var ca, tlsData map[string][]byte
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err1 := admin.CoreV1().Secrets(ns).Get(ctx, caKey, metav1.GetOptions{})
		s, err2 := admin.CoreV1().Secrets(ns).Get(ctx, serving, metav1.GetOptions{})
		if err1 != nil || err2 != nil {
			return false, nil
		}
		ca, tlsData = c.Data, s.Data
		return len(tlsData["tls.crt"]) > 0, nil
	}); err != nil {
		t.Fatalf("the keeper did not write %s within 30 s\n%s", serving, proc.Output())
	}
	if got := slices.Sorted(maps.Keys(tlsData)); !slices.Equal(got, []string{"ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("serving Secret keys %v, want ca.crt tls.crt tls.key", got)
	}
	if got := slices.Sorted(maps.Keys(ca)); !slices.Equal(got, []string{"ca.crt", "ca.key"}) {
		t.Errorf("CA Secret keys %v, want ca.crt ca.key", got)
	}
	if bytes.Contains(tlsData["ca.crt"], []byte("PRIVATE KEY")) || !bytes.Equal(tlsData["ca.crt"], ca["ca.crt"]) {
		t.Errorf("serving Secret's ca.crt is not the CA's certificate alone")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(tlsData["ca.crt"])
	certs, err := certutil.ParseCertsPEM(tlsData["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pool-scheduler.pool-scheduler.svc", "pool-labeler.pool-scheduler.svc"} {
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate does not verify for %s against ca.crt: %v", name, err)
		}
	}
	if left := time.Until(certs[0].NotAfter); left > 366*24*time.Hour {
		t.Errorf("the serving certificate lives %s, want a year at most", left)
	}

	// Its own /metrics serves the certificate it keeps (verified as the ServiceMonitor does) and
	// exports its expiry.
	promCfg, _ := util.ServiceAccountConfig(ctx, t, cp, "monitoring", "prometheus", nil)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "pool-scheduler.pool-scheduler.svc"}}}
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		req.Header.Set("Authorization", "Bearer "+promCfg.BearerToken)
		resp, err := client.Do(req)
		if err != nil {
			body = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil || !strings.Contains(body, `pool_scheduler_certificate_not_after_timestamp_seconds{certificate="serving",secret="pool-scheduler/pool-scheduler-metrics-serving"}`) {
		t.Errorf("scraping the keeper with its own certificate: %v\n%.400s", err, body)
	}

	// The keeper: its two Secrets by name, get and update; nothing else.
	for what, call := range map[string]func(context.Context) error{
		"get another Secret": func(ctx context.Context) error {
			_, err := kc.CoreV1().Secrets(ns).Get(ctx, "someone-elses", metav1.GetOptions{})
			return err
		},
		"list Secrets": func(ctx context.Context) error {
			_, err := kc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"create a Secret": func(ctx context.Context) error {
			_, err := kc.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			return err
		},
		"delete its CA Secret": func(ctx context.Context) error {
			return kc.CoreV1().Secrets(ns).Delete(ctx, caKey, metav1.DeleteOptions{})
		},
		"get a Secret in kube-system": func(ctx context.Context) error {
			_, err := kc.CoreV1().Secrets("kube-system").Get(ctx, "anything", metav1.GetOptions{})
			return err
		},
	} {
		if err := call(ctx); !apierrors.IsForbidden(err) {
			t.Errorf("certificate keeper may %s: %v, want forbidden", what, err)
		}
	}
	// The serving identities never read the CA key (nor, through the API, the serving Secret).
	for _, sa := range []string{"pool-scheduler", "pool-labeler", "pool-scheduler-spread", "pool-scheduler-webhook"} {
		cfg, _ := util.ServiceAccountConfig(ctx, t, cp, ns, sa, nil)
		cs := clientFor(t, cfg)
		for _, name := range []string{caKey, serving} {
			if _, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s may get Secret %s: %v, want forbidden", sa, name, err)
			}
		}
		if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s may list Secrets in %s: %v, want forbidden", sa, ns, err)
		}
	}
	if exited, err := proc.Wait(0); exited {
		t.Errorf("pool-labeler certs exited: %v\n%s", err, proc.Output())
	}
	if m := forbidden.FindAllString(proc.Output(), -1); len(m) > 0 {
		t.Errorf("pool-labeler certs had requests refused:\n%s", grepLinesRe(proc.Output(), forbidden, 10))
	}
}
