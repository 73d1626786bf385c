package webhook

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	jsonpatch6902 "gopkg.in/evanphx/json-patch.v4"
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

func TestHandler(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	m, err := admissionpkg.NewMutator("pool-scheduler", profile.DefaultArgs().SystemPoolGuard, true)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Mutator: m.WithDegradedSpread(profile.DefaultArgs().DomainSpread), Decoder: admission.NewDecoder(scheme)}
	request := func(raw []byte) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: types.UID("1"), Namespace: "shop", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		}}
	}
	podJSON := func(p *v1.Pod) []byte {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	for _, tt := range []struct {
		name        string
		raw         []byte
		degraded    bool // Handoff says pool-scheduler is not healthy
		wantPatches []string
		result      string
	}{
		// No healthy pool-scheduler: the pod keeps the default scheduler, with the affinity.
		{name: "degraded: affinity only", raw: podJSON(st.MakePod().Name("web").Obj()), degraded: true,
			wantPatches: []string{"/spec/affinity"}, result: "mutated"},
		{name: "degraded: a ReplicaSet's pod also gets the spread", raw: podJSON(st.MakePod().Name("web-1").Label("pod-template-hash", "5d8f").
			OwnerReference("web", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()), degraded: true,
			wantPatches: []string{"/spec/affinity", "/spec/topologySpreadConstraints"}, result: "mutated"},
		{name: "handed over: a ReplicaSet's pod gets no spread (DomainSpread spreads it)", raw: podJSON(st.MakePod().Name("web-1").Label("pod-template-hash", "5d8f").
			OwnerReference("web", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()),
			wantPatches: []string{"/metadata/annotations", "/spec/affinity", "/spec/schedulerName"}, result: "mutated"},
		{name: "degraded: a pod naming pool-scheduler keeps it", raw: podJSON(st.MakePod().Name("own").SchedulerName("pool-scheduler").Obj()), degraded: true,
			wantPatches: []string{"/spec/affinity"}, result: "mutated"},
		{name: "user pod: name and affinity", raw: podJSON(st.MakePod().Name("web").Obj()),
			wantPatches: []string{"/metadata/annotations", "/spec/affinity", "/spec/schedulerName"}, result: "mutated"},
		// A field this build does not know (a newer apiserver's) must survive: no remove patch.
		{name: "unknown field kept", raw: []byte(`{"metadata":{"name":"new"},"spec":{"containers":[{"name":"c","image":"i"}],"fieldOfTomorrow":{"x":1}}}`),
			wantPatches: []string{"/metadata/annotations", "/spec/affinity", "/spec/schedulerName"}, result: "mutated"},
		{name: "existing node affinity: only its required terms", raw: podJSON(st.MakePod().Name("pref").
			NodeAffinityIn("disk", []string{"ssd"}, st.NodeSelectorTypeMatchExpressions).Obj()),
			wantPatches: []string{"/metadata/annotations", "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", "/spec/schedulerName"}, result: "mutated"},
		// The hand-over marker joins annotations the pod has (a JSON Pointer escapes its "/").
		{name: "handed over with annotations of its own: the marker added among them", raw: podJSON(st.MakePod().Name("web").Annotation("team", "shop").Obj()),
			wantPatches: []string{"/metadata/annotations/pool-scheduler.io~1handed-over", "/spec/affinity", "/spec/schedulerName"}, result: "mutated"},
		// Empty annotations are omitted from kube-apiserver's encoding: the marker comes as the whole map.
		{name: "handed over with empty annotations: the marker as the whole map", raw: []byte(`{"metadata":{"name":"new","annotations":{}},"spec":{"containers":[{"name":"c","image":"i"}]}}`),
			wantPatches: []string{"/metadata/annotations", "/spec/affinity", "/spec/schedulerName"}, result: "mutated"},
		{name: "another scheduler: unchanged", raw: podJSON(st.MakePod().Name("batch").SchedulerName("volcano").Obj()), result: "unchanged"},
		{name: "undecodable: allowed unchanged", raw: []byte(`{"spec": 7}`), result: "error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := testutil.ToFloat64(webhookRequests.WithLabelValues(tt.result))
			h.Handoff = &handoff.Judge{Gauge: handoffMode, Leader: func(context.Context) (bool, string) { return !tt.degraded, "test" }}
			resp := h.Handle(context.Background(), request(tt.raw))
			if got, want := testutil.ToFloat64(handoffMode), map[bool]float64{false: 1, true: 0}[tt.degraded]; tt.result != "error" && got != want {
				t.Errorf("pool_scheduler_webhook_handoff = %v, want %v", got, want)
			}
			if !resp.Allowed {
				t.Fatalf("denied: %+v (the webhook never blocks a pod)", resp.Result)
			}
			var paths []string
			for _, p := range resp.Patches {
				paths = append(paths, p.Path)
			}
			sort.Strings(paths)
			for _, p := range resp.Patches {
				if p.Operation != "add" {
					t.Errorf("patch %s %s: the webhook only adds (sets) what it changed", p.Operation, p.Path)
				}
			}
			if got := strings.Join(paths, ","); got != strings.Join(tt.wantPatches, ",") {
				t.Errorf("patches %v, want %v", paths, tt.wantPatches)
			}
			// Applied to the pod, the patch hands it over with the marker, and keeps what it had.
			if tt.result == "mutated" && !tt.degraded {
				patch, err := json.Marshal(resp.Patches)
				if err != nil {
					t.Fatal(err)
				}
				decoded, err := jsonpatch6902.DecodePatch(patch)
				if err != nil {
					t.Fatal(err)
				}
				out, err := decoded.Apply(tt.raw)
				if err != nil {
					t.Fatalf("applying %s: %v", patch, err)
				}
				var got v1.Pod
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatal(err)
				}
				if got.Annotations[profile.HandedOverAnnotation] != "pool-scheduler" || got.Spec.SchedulerName != "pool-scheduler" {
					t.Errorf("patched pod: schedulerName %q, annotations %v; want pool-scheduler with %s", got.Spec.SchedulerName, got.Annotations, profile.HandedOverAnnotation)
				}
				if in := (&v1.Pod{}); json.Unmarshal(tt.raw, in) == nil {
					for k, v := range in.Annotations {
						if got.Annotations[k] != v {
							t.Errorf("annotation %s lost", k)
						}
					}
				}
			}
			if after := testutil.ToFloat64(webhookRequests.WithLabelValues(tt.result)); after != before+1 {
				t.Errorf("pool_scheduler_webhook_requests_total{result=%q} went %v -> %v, want +1", tt.result, before, after)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	err := (&Options{Port: 70000}).Validate()
	for _, flag := range []string{"--config", "--port", "--cert-dir"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("error %v does not name %s", err, flag)
		}
	}
	ok := Options{Profile: &profile.Profile{Path: "c"}, Port: 9443, CertDir: "/tmp/x"}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
