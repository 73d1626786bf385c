package webhook

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	admissionpkg "github.com/pool-scheduler/pool-scheduler/pkg/admission"
	"github.com/pool-scheduler/pool-scheduler/pkg/handoff"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// FuzzWebhookPatch feeds the webhook arbitrary pods (JSON as kube-apiserver sends them, unknown
// fields included) in both modes (handed over, degraded) and checks the JSON patch it answers
// with as kube-apiserver uses it: decoded and applied with the library kube-apiserver's mutating
// webhook dispatcher uses (gopkg.in/evanphx/json-patch.v4, k8s.io/apiserver
// pkg/admission/plugin/webhook/mutating/dispatcher.go), to the request's JSON and to the pod
// re-encoded from its Go type (what the dispatcher patches). The webhook never denies; the
// patch applies cleanly and only adds; the result decodes as a pod; nothing outside the paths
// it names changes (unknown fields survive); a second admission of the result changes nothing
// (the patch is idempotent); pods bound, mirrored or naming another scheduler get no patch; the
// schedulerName ends up the pod's own or pool-scheduler.
func FuzzWebhookPatch(f *testing.F) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	m, err := admissionpkg.NewMutator("pool-scheduler", profile.DefaultArgs().SystemPoolGuard, true)
	if err != nil {
		f.Fatal(err)
	}
	m = m.WithDegradedSpread(profile.DefaultArgs().DomainSpread)
	decoder := admission.NewDecoder(scheme)

	rs := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	seed := func(p *v1.Pod) []byte {
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, raw := range [][]byte{
		seed(st.MakePod().Name("web").Obj()),
		seed(st.MakePod().Name("web-1").Label("pod-template-hash", "5d8f").OwnerReference("web", rs).Obj()),
		seed(st.MakePod().Name("own").SchedulerName("pool-scheduler").Obj()),
		seed(st.MakePod().Name("default").SchedulerName("default-scheduler").Obj()),
		seed(st.MakePod().Name("batch").SchedulerName("volcano").Obj()),
		seed(st.MakePod().Name("bound").Node("n1").Obj()),
		seed(st.MakePod().Name("pref").NodeAffinityIn("disk", []string{"ssd"}, st.NodeSelectorTypeMatchExpressions).Obj()),
		seed(st.MakePod().Name("sys").Namespace("kube-system").Obj()),
		[]byte(`{"metadata":{"name":"crit","namespace":"shop"},"spec":{"priorityClassName":"system-cluster-critical","containers":[{"name":"c","image":"i"}]}}`),
		seed(st.MakePod().Name("tol").Toleration("CriticalAddonsOnly").Obj()),
		seed(st.MakePod().Name("spread").SpreadConstraint(1, "topology.kubernetes.io/zone", v1.DoNotSchedule, nil, nil, nil, nil, nil).OwnerReference("web", rs).Obj()),
		[]byte(`{"metadata":{"name":"new","annotations":{"kubernetes.io/config.mirror":"x"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`),
		[]byte(`{"metadata":{"name":"new"},"spec":{"containers":[{"name":"c","image":"i"}],"fieldOfTomorrow":{"x":1},"affinity":{"podAntiAffinity":{}}}}`),
		[]byte(`{"metadata":{"name":"new"},"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{},{"matchFields":[{"key":"metadata.name","operator":"In","values":["n"]}]}]}}}}}`),
		[]byte(`{"metadata":{"name":"new","annotations":{}},"spec":{"containers":[{"name":"c","image":"i"}]}}`),
		[]byte(`{"metadata":{"name":"opted-out","labels":{"pool-scheduler.io/enabled":"false"}},"spec":{}}`),
		[]byte(`{"spec": 7}`),
		[]byte(`null`),
	} {
		f.Add(raw, false)
		f.Add(raw, true)
	}

	f.Fuzz(func(t *testing.T, raw []byte, degraded bool) {
		h := &Handler{Mutator: m, Decoder: decoder,
			Handoff: &handoff.Judge{Gauge: handoffMode, Leader: func(context.Context) (bool, string) { return !degraded, "fuzz" }}}
		admit := func(raw []byte) admission.Response {
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: types.UID("1"), Namespace: "shop", Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("denied %s: %+v (the webhook never blocks a pod)", raw, resp.Result)
			}
			return resp
		}
		resp := admit(raw)
		in := &v1.Pod{}
		// The webhook's own decoder (kube-apiserver's: case-sensitive, unlike encoding/json).
		if err := decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, in); err != nil || len(resp.Patches) == 0 {
			return // undecodable (allowed unchanged, checked above), or nothing to patch
		}
		if in.Spec.NodeName != "" || in.Annotations[v1.MirrorPodAnnotationKey] != "" ||
			(in.Spec.SchedulerName != "" && in.Spec.SchedulerName != v1.DefaultSchedulerName && in.Spec.SchedulerName != m.SchedulerName()) {
			t.Fatalf("patched a pod that is bound, mirrored or another scheduler's: %s\npatch %+v", raw, resp.Patches)
		}
		for _, op := range resp.Patches {
			if op.Operation != "add" {
				t.Fatalf("patch %s %s: the webhook only adds (sets) what it changed", op.Operation, op.Path)
			}
		}
		patchJSON, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(patchJSON)
		if err != nil {
			t.Fatalf("kube-apiserver cannot decode the patch %s: %v", patchJSON, err)
		}
		// The pod as kube-apiserver encodes its typed object, and as the request carried it.
		typed, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		docs := [][]byte{typed}
		// The request's own bytes too, when they are what kube-apiserver could send: JSON (not
		// YAML, which the decoder reads too), with metadata and spec objects (its encoding of a
		// typed pod always has both; the patch adds members inside them).
		if trimmed := strings.TrimSpace(string(raw)); json.Valid(raw) && strings.HasPrefix(trimmed, "{") {
			if tree, ok := decodeTree(t, raw).(map[string]any); ok {
				_, meta := tree["metadata"].(map[string]any)
				_, spec := tree["spec"].(map[string]any)
				if meta && spec {
					docs = append(docs, raw)
				}
			}
		}
		for _, doc := range docs {
			patched, err := patch.Apply(doc)
			if err != nil {
				t.Fatalf("the patch %s does not apply to %s: %v", patchJSON, doc, err)
			}
			out := &v1.Pod{}
			if err := decoder.DecodeRaw(runtime.RawExtension{Raw: patched}, out); err != nil {
				t.Fatalf("the patched pod does not decode: %v\n%s", err, patched)
			}
			if out.Spec.SchedulerName != in.Spec.SchedulerName && out.Spec.SchedulerName != m.SchedulerName() {
				t.Fatalf("schedulerName %q became %q", in.Spec.SchedulerName, out.Spec.SchedulerName)
			}
			if degraded && out.Spec.SchedulerName != in.Spec.SchedulerName {
				t.Fatalf("degraded: schedulerName %q became %q (the pod must keep its scheduler)", in.Spec.SchedulerName, out.Spec.SchedulerName)
			}
			// Only the named paths change: the documents without them are equal (reflect:
			// generic JSON trees, in a loop that runs a million times).
			before, after := decodeTree(t, doc), decodeTree(t, patched)
			for _, op := range resp.Patches {
				removePath(before, op.Path)
				removePath(after, op.Path)
			}
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("the patch %s changed more than its paths:\nbefore %s\nafter  %s", patchJSON, doc, patched)
			}
			// Idempotent: admitting the result again changes nothing.
			again := admit(patched)
			if len(again.Patches) == 0 {
				continue
			}
			p2, err := json.Marshal(again.Patches)
			if err != nil {
				t.Fatal(err)
			}
			second, err := jsonpatch.DecodePatch(p2)
			if err != nil {
				t.Fatal(err)
			}
			twice, err := second.Apply(patched)
			if err != nil {
				t.Fatalf("the second patch %s does not apply to %s: %v", p2, patched, err)
			}
			if !reflect.DeepEqual(decodeTree(t, patched), decodeTree(t, twice)) {
				t.Fatalf("not idempotent: a second admission of\n%s\npatched it again with %s to\n%s", patched, p2, twice)
			}
		}
	})
}

func decodeTree(t *testing.T, doc []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return v
}

// removePath deletes the member a JSON pointer (RFC 6901) names from a tree of objects, if
// there; a pointer into an array removes nothing (the webhook's paths name object members).
func removePath(tree any, pointer string) {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	node, ok := tree.(map[string]any)
	for _, p := range parts[:len(parts)-1] {
		if !ok {
			return
		}
		node, ok = node[p].(map[string]any)
	}
	if ok {
		delete(node, parts[len(parts)-1])
	}
}
