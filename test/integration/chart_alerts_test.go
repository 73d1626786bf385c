package integration

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// absenceAlerts maps each alert on an absent pool-labeler component to the Deployment that runs
// the component (its name in a release with scheduler.name pool-scheduler).
var absenceAlerts = map[string]string{
	"PoolSchedulerLabelerDown":           "pool-labeler",
	"PoolSchedulerHandoffControllerDown": "pool-scheduler-handoff",
	"PoolSchedulerSpreadKeeperDown":      "pool-scheduler-spread",
	"PoolSchedulerWebhookDown":           "pool-scheduler-webhook",
	"PoolSchedulerCertificateKeeperDown": "pool-scheduler-certs",
}

var alertMode = regexp.MustCompile(`pool_labeler_build_info\{mode="([a-z]+)"\}`)

// TestHelmChartAbsenceAlertsFollowComponents: the chart's PrometheusRule holds an alert on an
// absent component exactly where the release runs the component (absent() would fire for good
// for one never installed, e.g. the certificate keeper with tlsSecretName, the webhook in policy
// mode, the spread keeper switched off), the alert names the mode the Deployment runs, and a
// ServiceMonitor scrapes the Deployment's metrics port, so the alert stays silent while it runs.
// Every other alert of files/alerts.yaml is always rendered.
func TestHelmChartAbsenceAlertsFollowComponents(t *testing.T) {
	const monitoring = `monitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}`
	all := slices.Sorted(maps.Keys(absenceAlerts))
	without := func(names ...string) []string {
		return slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(names, n) })
	}
	for _, tt := range []struct {
		name   string
		values string
		want   []string
	}{
		{name: "defaults", values: monitoring, want: all},
		{name: "policy mode: no webhook", values: `{` + monitoring + `, admission: {mode: policy}}`,
			want: without("PoolSchedulerWebhookDown")},
		{name: "policy mode and an own metrics certificate: no keeper", values: `{monitoring: {serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}, prometheusRule: {enabled: true}}, admission: {mode: policy}}`,
			want: without("PoolSchedulerWebhookDown", "PoolSchedulerCertificateKeeperDown")},
		{name: "own metrics certificate, webhook certificate from cert-manager: no keeper", values: `{monitoring: {serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}, prometheusRule: {enabled: true}}, admission: {webhook: {certManager: {enabled: true, issuerRef: {name: ca, kind: ClusterIssuer}}}}}`,
			want: without("PoolSchedulerCertificateKeeperDown")},
		{name: "own metrics certificate, webhook certificate kept: keeper", values: `{monitoring: {serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}, prometheusRule: {enabled: true}}}`,
			want: all},
		{name: "spread keeper off", values: `{` + monitoring + `, spread: {enabled: false}}`,
			want: without("PoolSchedulerSpreadKeeperDown")},
		{name: "labeler controller off", values: `{` + monitoring + `, labeler: {controller: {enabled: false}}}`,
			want: without("PoolSchedulerLabelerDown")},
		{name: "hand-off controller off", values: `{` + monitoring + `, handoff: {enabled: false}}`,
			want: without("PoolSchedulerHandoffControllerDown")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderChart(t, chartNamespace, tt.values)
			if err != nil {
				t.Fatal(err)
			}
			rule := r.get(t, "PrometheusRule", "pool-scheduler")
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			var absence, others []string
			exprs := map[string]string{}
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, ru := range rules {
					name, _ := ru.(map[string]any)["alert"].(string)
					exprs[name], _ = ru.(map[string]any)["expr"].(string)
					if _, ok := absenceAlerts[name]; ok {
						absence = append(absence, name)
					} else {
						others = append(others, name)
					}
				}
			}
			slices.Sort(absence)
			if diff := cmp.Diff(tt.want, absence); diff != "" {
				t.Errorf("alerts on absent components (-want +got):\n%s", diff)
			}
			if !slices.Contains(others, "PoolSchedulerNoLeader") || !slices.Contains(others, "PoolSchedulerHandoffSwitchFailing") {
				t.Errorf("other alerts %v: the chart dropped one", others)
			}
			ids := r.ids()
			for alert, deployment := range absenceAlerts {
				runs := slices.Contains(ids, "Deployment "+chartNamespace+"/"+deployment)
				if runs != slices.Contains(absence, alert) {
					t.Errorf("%s rendered %v, Deployment %s rendered %v", alert, slices.Contains(absence, alert), deployment, runs)
				}
				if !runs {
					continue
				}
				d := r.getIn(t, "Deployment", chartNamespace, deployment)
				m := alertMode.FindStringSubmatch(exprs[alert])
				if args := containerArgs(t, d); m == nil || len(args) == 0 || args[0] != m[1] {
					t.Errorf("%s watches %v, the Deployment %s runs pool-labeler %v", alert, m, deployment, args)
				}
				checkScraped(t, r, d)
			}
		})
	}
}

// checkScraped: a ServiceMonitor of the release selects a Service that selects the Deployment's
// pods and names the port the monitor scrapes (metrics), which the pods serve.
func checkScraped(t *testing.T, r *renderedChart, d *unstructured.Unstructured) {
	t.Helper()
	podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	matches := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	for _, sm := range r.objects {
		if sm.GetKind() != "ServiceMonitor" {
			continue
		}
		smSel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, svc := range r.objects {
			if svc.GetKind() != "Service" || svc.GetNamespace() != d.GetNamespace() || !matches(smSel, svc.GetLabels()) {
				continue
			}
			svcSel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
			if !matches(svcSel, podLabels) {
				continue
			}
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			for _, e := range endpoints {
				for _, p := range ports {
					if p.(map[string]any)["name"] == e.(map[string]any)["port"] && e.(map[string]any)["port"] == "metrics" {
						return
					}
				}
			}
		}
	}
	t.Errorf("no ServiceMonitor scrapes the metrics port of Deployment %s", d.GetName())
}

// TestHelmChartTwoReleasesElectApart: two releases in one namespace, with their own
// scheduler.name, elect their scheduler, hand-off controller and spread keeper on Leases of their
// own, and each component's Role grants exactly its Lease; the first release's names stay the
// kustomize manifests' (upgrades keep their Lease). Their objects do not collide once the second
// leaves the labelers (one per cluster: they own the nodes' managed-labels annotation) to the
// first; with them on, the second release would render the first's cluster-wide labeler
// objects, which Helm refuses to take over, and likewise the budget floor's policy.
func TestHelmChartTwoReleasesElectApart(t *testing.T) {
	const second = `{scheduler: {name: batch-scheduler}, labeler: {controller: {enabled: false}, domain: {enabled: false}}}`
	leases := func(t *testing.T, values string) (map[string]string, []string) {
		r, err := renderChart(t, chartNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		sched := "pool-scheduler"
		if strings.Contains(values, "batch-scheduler") {
			sched = "batch-scheduler"
		}
		cfg, err := r.schedulerConfig(t, sched+"-config")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{"scheduler": cfg.LeaderElection.ResourceName}
		for _, component := range []string{"handoff", "spread"} {
			name := sched + "-" + component
			for _, a := range containerArgs(t, r.getIn(t, "Deployment", chartNamespace, name)) {
				if v, ok := strings.CutPrefix(a, "--leader-elect-lease="); ok {
					out[component] = v
				}
			}
			// The component may get and update its own Lease only.
			role := r.getIn(t, "Role", chartNamespace, name)
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			var updatable []string
			for _, ru := range rules {
				verbs, _, _ := unstructured.NestedStringSlice(ru.(map[string]any), "verbs")
				resources, _, _ := unstructured.NestedStringSlice(ru.(map[string]any), "resources")
				names, _, _ := unstructured.NestedStringSlice(ru.(map[string]any), "resourceNames")
				if slices.Contains(resources, "leases") && slices.Contains(verbs, "update") {
					updatable = append(updatable, names...)
				}
			}
			if diff := cmp.Diff([]string{out[component]}, updatable); diff != "" {
				t.Errorf("Role %s updates Leases (-its flag's +granted):\n%s", name, diff)
			}
		}
		return out, r.ids()
	}
	first, firstIDs := leases(t, ``)
	if diff := cmp.Diff(map[string]string{"scheduler": "pool-scheduler", "handoff": "pool-scheduler-handoff", "spread": "pool-scheduler-spread"}, first); diff != "" {
		t.Errorf("the first release's Leases (-the kustomize manifests' +chart):\n%s", diff)
	}
	other, otherIDs := leases(t, second)
	if diff := cmp.Diff(map[string]string{"scheduler": "batch-scheduler", "handoff": "batch-scheduler-handoff", "spread": "batch-scheduler-spread"}, other); diff != "" {
		t.Errorf("the second release's Leases (-want +got):\n%s", diff)
	}
	if shared := slices.DeleteFunc(slices.Clone(firstIDs), func(id string) bool { return !slices.Contains(otherIDs, id) }); len(shared) > 0 {
		t.Errorf("both releases render %v: Helm would refuse the second", shared)
	}
	// With its labelers on, the second release renders the first's cluster-wide labeler objects.
	r, err := renderChart(t, chartNamespace, `{scheduler: {name: batch-scheduler}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.ids(), "ClusterRole pool-labeler") || !slices.Contains(firstIDs, "ClusterRole pool-labeler") {
		t.Errorf("the labeler's ClusterRole is not shared by both releases' names: Helm would not refuse a second labeler")
	}
	// The budget floor is one per cluster too: a second release that turns it on renders the
	// first's floor policy, which Helm refuses to take over; with it in one release, nothing.
	const floorPolicy = "ValidatingAdmissionPolicy " + util.BudgetFloorPolicy
	withFloor := func(values string) []string {
		r, err := renderChart(t, chartNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		return r.ids()
	}
	firstFloor := withFloor(`{spread: {budgetFloor: {enabled: true}}}`)
	secondFloor := withFloor(`{scheduler: {name: batch-scheduler}, labeler: {controller: {enabled: false}, domain: {enabled: false}}, spread: {budgetFloor: {enabled: true}}}`)
	if !slices.Contains(firstFloor, floorPolicy) || !slices.Contains(secondFloor, floorPolicy) {
		t.Errorf("two releases with the budget floor on do not both render %s: Helm would not refuse the second floor", floorPolicy)
	}
	if shared := slices.DeleteFunc(slices.Clone(firstFloor), func(id string) bool { return !slices.Contains(otherIDs, id) }); len(shared) > 0 {
		t.Errorf("a release with the floor and one without both render %v: Helm would refuse the second", shared)
	}
}
