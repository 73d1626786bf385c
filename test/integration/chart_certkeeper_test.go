package integration

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmChartCertKeeperMonitoring: with monitoring, the certificate keeper's Service and
// ServiceMonitor render whenever the keeper runs, also when it keeps the webhook's certificate
// alone (monitoring.serviceMonitor.tlsSecretName names your own metrics certificate): otherwise
// PoolSchedulerCertificateExpiring could never fire for the webhook's certificate. It then serves
// the mounted certificate, which its ServiceMonitor verifies like the others'.
func TestHelmChartCertKeeperMonitoring(t *testing.T) {
	const keeper = "pool-scheduler-certs"
	for _, tt := range []struct {
		values     string
		monitored  bool
		servesOwn  bool
		keeperRuns bool
	}{
		{`monitoring: {serviceMonitor: {enabled: true}}`, true, false, true},
		{`monitoring: {serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}}`, true, true, true},
		{`{monitoring: {serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}}, admission: {mode: policy}}`, false, false, false},
		{`monitoring: {serviceMonitor: {enabled: false}}`, false, false, true},
	} {
		t.Run(tt.values, func(t *testing.T) {
			r, err := renderChart(t, chartNamespace, tt.values)
			if err != nil {
				t.Fatal(err)
			}
			has := func(id string) bool { return slices.Contains(r.ids(), id) }
			if got := has("Deployment " + chartNamespace + "/" + keeper); got != tt.keeperRuns {
				t.Fatalf("keeper Deployment rendered %v, want %v", got, tt.keeperRuns)
			}
			for _, id := range []string{"Service " + chartNamespace + "/" + keeper, "ServiceMonitor " + chartNamespace + "/" + keeper} {
				if got := has(id); got != tt.monitored {
					t.Errorf("%s rendered %v, want %v", id, got, tt.monitored)
				}
			}
			if !tt.keeperRuns {
				return
			}
			d := r.getIn(t, "Deployment", chartNamespace, keeper)
			args := containerArgs(t, d)
			if tt.monitored {
				// The ServiceMonitor selects the Service's metrics port, which the keeper serves.
				svc := r.getIn(t, "Service", chartNamespace, keeper)
				sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
				labels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
				for k, v := range sel {
					if labels[k] != v {
						t.Errorf("Service %s selects %s=%s, the keeper's pods have %q", keeper, k, v, labels[k])
					}
				}
				sm := r.getIn(t, "ServiceMonitor", chartNamespace, keeper)
				smSel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				svcLabels := svc.GetLabels()
				for k, v := range smSel {
					if svcLabels[k] != v {
						t.Errorf("ServiceMonitor %s selects %s=%s, the Service has %q", keeper, k, v, svcLabels[k])
					}
				}
			}
			var dep appsv1.Deployment
			fromUnstructured(t, d, &dep)
			mounted := ""
			for _, v := range dep.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					mounted = v.Secret.SecretName
				}
			}
			wantDir := map[bool]string{true: "--metrics-cert-dir=/etc/pool-labeler-tls", false: "--metrics-cert-dir=/tmp/certs"}[tt.servesOwn]
			if tt.monitored && !containsString(args, wantDir) {
				t.Errorf("keeper args %v, want %s", args, wantDir)
			}
			if want := map[bool]string{true: "scrape-tls", false: ""}[tt.servesOwn]; mounted != want {
				t.Errorf("keeper mounts Secret %q, want %q", mounted, want)
			}
			if tt.servesOwn {
				for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
					if m.Name == "metrics-tls" && (m.MountPath != "/etc/pool-labeler-tls" || !m.ReadOnly) {
						t.Errorf("metrics-tls mounted %s readOnly %v", m.MountPath, m.ReadOnly)
					}
				}
			}
		})
	}
}
