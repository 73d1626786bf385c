package static

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// systemModeKey is AKS's label of a system-mode pool's nodes (value "system").
const systemModeKey = "kubernetes.azure.com/mode"

var criticalAddonsOnly = v1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: v1.TaintEffectNoSchedule}

// placedWorkload is a shipped workload's pod template.
type placedWorkload struct {
	id   string // "Deployment pool-labeler"
	kind string
	spec v1.PodSpec
}

func placedWorkloads(t *testing.T, objs []*unstructured.Unstructured) []placedWorkload {
	t.Helper()
	var out []placedWorkload
	for _, o := range objs {
		w := placedWorkload{id: o.GetKind() + " " + o.GetName(), kind: o.GetKind()}
		var err error
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)
			w.spec = d.Spec.Template.Spec
		case "DaemonSet":
			var d appsv1.DaemonSet
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)
			w.spec = d.Spec.Template.Spec
		case "Job":
			var j batchv1.Job
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &j)
			w.spec = j.Spec.Template.Spec
		case "StatefulSet", "ReplicaSet", "CronJob", "Pod":
			t.Fatalf("%s: a workload kind this test does not read", w.id)
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", w.id, err)
		}
		out = append(out, w)
	}
	return out
}

// tolerates reports whether spec tolerates taint (wildcards included), by the Exists and Equal
// rules of Toleration.ToleratesTaint, written out because its signature differs between the
// release lines (1.36 adds a logger and a feature flag).
func tolerates(spec v1.PodSpec, taint v1.Taint) bool {
	return slices.ContainsFunc(spec.Tolerations, func(tol v1.Toleration) bool {
		if tol.Effect != "" && tol.Effect != taint.Effect {
			return false
		}
		if tol.Key != "" && tol.Key != taint.Key {
			return false
		}
		switch tol.Operator {
		case v1.TolerationOpExists:
			return true
		case "", v1.TolerationOpEqual:
			return tol.Key != "" && tol.Value == taint.Value
		}
		return false
	})
}

// prefersSystemPool reports whether spec has a preferred node-affinity term for the AKS system
// pool, and whether any required node affinity or nodeSelector names the system-pool label (which
// would keep the pod pending on a cluster without one).
func prefersSystemPool(spec v1.PodSpec) (preferred, requiredToo bool) {
	if _, ok := spec.NodeSelector[systemModeKey]; ok {
		requiredToo = true
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
		return false, requiredToo
	}
	na := spec.Affinity.NodeAffinity
	for _, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		for _, r := range term.Preference.MatchExpressions {
			if r.Key == systemModeKey && r.Operator == v1.NodeSelectorOpIn && slices.Equal(r.Values, []string{"system"}) && term.Weight > 0 {
				preferred = true
			}
		}
	}
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				requiredToo = requiredToo || r.Key == systemModeKey
			}
		}
	}
	return preferred, requiredToo
}

// startupTaintTolerated reports whether spec tolerates a startup taint with key, whatever its
// effect (the labeler lifts every taint with its key).
func startupTaintTolerated(spec v1.PodSpec, key string) bool {
	for _, effect := range []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute, v1.TaintEffectPreferNoSchedule} {
		if !tolerates(spec, v1.Taint{Key: key, Value: "true", Effect: effect}) {
			return false
		}
	}
	return true
}

// flagValue is the value of --name=... among args ("", false if absent).
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkPlacement checks the decision of docs/operations.md, "Where the product's own pods run",
// on every workload: a priority class; CriticalAddonsOnly tolerated; every Deployment and Job
// prefers the system pool and never requires it; the labeler's controller tolerates the startup
// taint its --startup-taint-key names, with any effect. It returns the ids seen.
func checkPlacement(t *testing.T, where string, workloads []placedWorkload) []string {
	t.Helper()
	var ids []string
	for _, w := range workloads {
		ids = append(ids, w.id)
		if w.spec.PriorityClassName == "" {
			t.Errorf("%s (%s): no priorityClassName", w.id, where)
		}
		if !tolerates(w.spec, criticalAddonsOnly) {
			t.Errorf("%s (%s): does not tolerate %s (tolerations %+v)", w.id, where, criticalAddonsOnly.ToString(), w.spec.Tolerations)
		}
		preferred, required := prefersSystemPool(w.spec)
		if required {
			t.Errorf("%s (%s): requires the system pool (%s): a cluster without one could not run it; prefer it", w.id, where, systemModeKey)
		}
		if w.kind != "DaemonSet" && !preferred {
			t.Errorf("%s (%s): no preferred node affinity for %s=system (affinity %+v)", w.id, where, systemModeKey, w.spec.Affinity)
		}
		if w.kind == "DaemonSet" && !startupTaintTolerated(w.spec, pool.StartupTaintKey) {
			t.Errorf("%s (%s): a DaemonSet that does not tolerate the startup taint: it would not run on the nodes it must label", w.id, where)
		}
		if w.id == "Deployment pool-labeler" {
			c := w.spec.Containers[0]
			key, ok := flagValue(c.Args, "startup-taint-key")
			if !ok {
				key = pool.StartupTaintKey // the flag's default
			}
			if key != "" && !startupTaintTolerated(w.spec, key) {
				t.Errorf("%s (%s): does not tolerate its own startup taint %s (every effect): with the taint on every pool nothing could run it (tolerations %+v)", w.id, where, key, w.spec.Tolerations)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// TestShippedPlacement (#56): every component's pod template, in the kustomize manifests and in
// the chart with its defaults, has a priority class, tolerates CriticalAddonsOnly, prefers (never
// requires) the AKS system pool (the domain labeler DaemonSet: runs everywhere, every taint
// tolerated), and the labeler's controller tolerates its own startup taint: the decision of
// docs/operations.md, "Where the product's own pods run".
func TestShippedPlacement(t *testing.T) {
	root := repoRoot(t)
	t.Run("kustomize", func(t *testing.T) {
		var objs []*unstructured.Unstructured
		for _, dir := range []string{"manifests", "manifests/labeler/domain", "manifests/admission/webhook"} {
			objs = append(objs, util.KustomizeObjects(t, filepath.Join(root, dir))...)
		}
		// Each once (the scheduler is in two kustomizations).
		seen := map[string]bool{}
		objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
			id := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
			dup := seen[id]
			seen[id] = true
			return dup
		})
		ids := checkPlacement(t, "kustomize", placedWorkloads(t, objs))
		want := []string{
			"DaemonSet pool-labeler-domain", "Deployment pool-labeler", "Deployment pool-scheduler", "Deployment pool-scheduler-certs",
			"Deployment pool-scheduler-handoff", "Deployment pool-scheduler-spread", "Deployment pool-scheduler-webhook",
		}
		for _, id := range want {
			if !slices.Contains(ids, id) {
				t.Errorf("%s not found in the kustomize manifests (found %v)", id, ids)
			}
		}
		// The labeler's flag, its toleration and its admission policy name one key.
		for _, o := range objs {
			if o.GetKind() != "ValidatingAdmissionPolicy" || !strings.Contains(o.GetName(), "pool-labeler") {
				continue
			}
			vars, _, _ := unstructured.NestedSlice(o.Object, "spec", "variables")
			for _, v := range vars {
				m, _ := v.(map[string]any)
				if m["name"] == "startupTaintKey" && m["expression"] != fmt.Sprintf("'%s'", pool.StartupTaintKey) {
					t.Errorf("%s: startupTaintKey %v, want '%s' (the labeler's --startup-taint-key and toleration)", o.GetName(), m["expression"], pool.StartupTaintKey)
				}
			}
		}
		for _, w := range placedWorkloads(t, objs) {
			if w.id == "Deployment pool-labeler" {
				if key, _ := flagValue(w.spec.Containers[0].Args, "startup-taint-key"); key != pool.StartupTaintKey {
					t.Errorf("%s: --startup-taint-key=%q, want %q (pool.StartupTaintKey, the policy's startupTaintKey)", w.id, key, pool.StartupTaintKey)
				}
			}
		}
	})

	render := func(t *testing.T, values string) []placedWorkload {
		t.Helper()
		objs, _, err := util.RenderChart("v1.34.10", "pool-scheduler", "pool-scheduler", values)
		if err != nil {
			t.Fatalf("rendering the chart with %s: %v", values, err)
		}
		return placedWorkloads(t, objs)
	}
	workload := func(t *testing.T, ws []placedWorkload, id string) placedWorkload {
		t.Helper()
		for _, w := range ws {
			if w.id == id {
				return w
			}
		}
		t.Fatalf("%s not rendered", id)
		return placedWorkload{}
	}

	t.Run("chart", func(t *testing.T) {
		// The defaults (the webhook, whose certificate keeper runs for it), and the certificate
		// keeper running for the ServiceMonitors alone.
		for values, webhook := range map[string]bool{"": true, "{monitoring: {serviceMonitor: {enabled: true}}, admission: {mode: policy}}": false} {
			ids := checkPlacement(t, "chart "+values, render(t, values))
			want := []string{
				"DaemonSet pool-labeler-domain", "Deployment pool-labeler", "Deployment pool-scheduler", "Deployment pool-scheduler-certs",
				"Deployment pool-scheduler-handoff", "Deployment pool-scheduler-spread", "Job pool-scheduler-handback",
			}
			if webhook {
				want = append(want, "Deployment pool-scheduler-webhook")
			}
			for _, id := range want {
				if !slices.Contains(ids, id) {
					t.Errorf("chart %s: %s not rendered (found %v)", values, id, ids)
				}
			}
		}
	})

	t.Run("chart values", func(t *testing.T) {
		labeler := func(t *testing.T, values string) v1.PodSpec {
			t.Helper()
			return workload(t, render(t, values), "Deployment pool-labeler").spec
		}
		// The startup taint's toleration follows startupTaintKey, and is gone with it.
		s := labeler(t, `{labeler: {controller: {startupTaintKey: example.com/init}}}`)
		if !startupTaintTolerated(s, "example.com/init") || startupTaintTolerated(s, pool.StartupTaintKey) {
			t.Errorf("startupTaintKey example.com/init: tolerations %+v, want that key (any effect) and not the default's", s.Tolerations)
		}
		s = labeler(t, `{labeler: {controller: {startupTaintKey: ""}}}`)
		if slices.ContainsFunc(s.Tolerations, func(tol v1.Toleration) bool { return tol.Key == pool.StartupTaintKey || tol.Key == "" }) {
			t.Errorf(`startupTaintKey "": tolerations %+v, want no startup taint toleration`, s.Tolerations)
		}
		if !tolerates(s, criticalAddonsOnly) {
			t.Errorf(`startupTaintKey "": tolerations %+v, want CriticalAddonsOnly kept`, s.Tolerations)
		}
		// Tolerations given replace the default list; the startup taint's is added all the same,
		// once.
		s = labeler(t, `{labeler: {controller: {tolerations: [{key: example.com/dedicated, operator: Exists}]}}}`)
		if tolerates(s, criticalAddonsOnly) || !tolerates(s, v1.Taint{Key: "example.com/dedicated", Effect: v1.TaintEffectNoSchedule}) || !startupTaintTolerated(s, pool.StartupTaintKey) {
			t.Errorf("tolerations replaced: %+v, want example.com/dedicated and the startup taint only", s.Tolerations)
		}
		s = labeler(t, fmt.Sprintf(`{labeler: {controller: {tolerations: [{key: %s, operator: Equal, value: "true"}]}}}`, pool.StartupTaintKey))
		if len(s.Tolerations) != 1 {
			t.Errorf("a toleration of the startup taint's key given: tolerations %+v, want it alone (not added twice)", s.Tolerations)
		}
		// Affinity given is merged into the default; the preference goes only when set to null.
		for _, tt := range []struct {
			values          string
			preferred, anti bool
		}{
			{`{scheduler: {affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: topology.kubernetes.io/zone}}]}}}}`, true, true},
			{`{scheduler: {affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: null}}}}`, false, false},
			{`{scheduler: {affinity: null}}`, false, false},
		} {
			s := workload(t, render(t, tt.values), "Deployment pool-scheduler").spec
			preferred, _ := prefersSystemPool(s)
			anti := s.Affinity != nil && s.Affinity.PodAntiAffinity != nil
			if preferred != tt.preferred || anti != tt.anti {
				t.Errorf("%s: system pool preferred %v, podAntiAffinity %v; want %v, %v (affinity %+v)", tt.values, preferred, anti, tt.preferred, tt.anti, s.Affinity)
			}
		}
	})
}
