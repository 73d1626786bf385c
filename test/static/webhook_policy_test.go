package static

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestWebhookPolicyComparesEveryField: the webhook's admission policy lets it change only
// clientConfig.caBundle of its webhooks by comparing every other field, named one by one (CEL
// cannot compare an object minus one field). A field the API gains is one the webhook could
// change unchecked, so each field of the Go type must be compared in both copies of the policy.
func TestWebhookPolicyComparesEveryField(t *testing.T) {
	var want []string
	for _, f := range jsonFields(reflect.TypeOf(admissionregistrationv1.MutatingWebhook{})) {
		switch f {
		case "name": // compared as the list of names
		case "clientConfig":
			for _, c := range jsonFields(reflect.TypeOf(admissionregistrationv1.WebhookClientConfig{})) {
				if c != "caBundle" {
					want = append(want, "w.clientConfig.?"+c+" == o.clientConfig.?"+c)
				}
			}
		default:
			want = append(want, "w.?"+f+" == o.?"+f)
		}
	}
	root := repoRoot(t)
	for _, file := range []string{
		"manifests/admission/webhook/admission-policy.yaml",
		"manifests/charts/pool-scheduler/templates/admission-webhook-policy.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(data), w) {
				t.Errorf("%s does not compare %q: the webhook could change it", file, w)
			}
		}
		if strings.Contains(string(data), "caBundle ==") || strings.Contains(string(data), "?caBundle") {
			t.Errorf("%s compares caBundle, which the webhook must be able to change", file)
		}
	}
}

// jsonFields are the JSON names of a struct type's fields.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
