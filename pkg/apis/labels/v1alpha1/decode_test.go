package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestDecodeToleratesMalformedSpecs(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		wantLabels map[string]LabelValue
		wantError  string
	}{
		{name: "valid", spec: `{"labels":{"example.com/a":"1"}}`, wantLabels: map[string]LabelValue{"example.com/a": "1"}},
		{name: "null", spec: `null`},
		{name: "empty", spec: `{}`},
		{name: "labels is a string", spec: `{"labels":"example.com/a=1"}`, wantError: "cannot unmarshal string"},
		{name: "value is a number", spec: `{"labels":{"example.com/n":5}}`, wantError: "cannot unmarshal number"},
		{name: "spec is a list", spec: `["example.com/a"]`, wantError: "cannot unmarshal array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// In a list beside a valid object, as an informer receives it: the list must decode.
			list := `{"items":[{"metadata":{"name":"bad"},"spec":` + tt.spec + `},{"metadata":{"name":"good"},"spec":{"labels":{"k":"v"}}}]}`
			var got NodePoolLabelSetList
			if err := json.Unmarshal([]byte(list), &got); err != nil {
				t.Fatalf("the list does not decode: %v", err)
			}
			if len(got.Items) != 2 || got.Items[1].Spec.Labels["k"] != "v" {
				t.Fatalf("items %+v", got.Items)
			}
			checkSpec(t, got.Items[0].Spec, tt.wantLabels, tt.wantError)

			// Through the unstructured converter, as the scheduler's dynamic informer does.
			var obj map[string]any
			if err := json.Unmarshal([]byte(`{"spec":`+tt.spec+`}`), &obj); err != nil {
				t.Fatal(err)
			}
			var set NodePoolLabelSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &set); err != nil {
				t.Fatalf("unstructured conversion: %v", err)
			}
			checkSpec(t, set.Spec, tt.wantLabels, tt.wantError)
		})
	}
}

func checkSpec(t *testing.T, spec NodePoolLabelSetSpec, wantLabels map[string]LabelValue, wantError string) {
	t.Helper()
	if diff := cmp.Diff(wantLabels, spec.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if (wantError == "") != (spec.DecodeError == "") || !strings.Contains(spec.DecodeError, wantError) {
		t.Errorf("DecodeError = %q, want it to contain %q", spec.DecodeError, wantError)
	}
	if out, _ := json.Marshal(spec); strings.Contains(string(out), "DecodeError") {
		t.Errorf("DecodeError is serialized: %s", out)
	}
}
