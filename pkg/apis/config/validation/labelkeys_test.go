package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateLabelKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want field.ErrorList
	}{
		{name: "valid", keys: []string{"agentpool", "example.com/pool"}},
		{
			name: "invalid key",
			keys: []string{"ok", "bad key"},
			want: field.ErrorList{field.Invalid(field.NewPath("keys").Index(1), "bad key", "")},
		},
		{
			name: "duplicate",
			keys: []string{"a", "a"},
			want: field.ErrorList{field.Duplicate(field.NewPath("keys").Index(1), "a")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ValidateLabelKeys(tt.keys, field.NewPath("keys"))
			if diff := cmp.Diff(tt.want, got, ignoreErrorDetail); diff != "" {
				t.Errorf("ValidateLabelKeys (-want +got):\n%s", diff)
			}
		})
	}
}

var ignoreErrorDetail = cmp.Transformer("errorTypeAndField", func(e *field.Error) string {
	return string(e.Type) + " " + e.Field
})

func TestValidatePoolName(t *testing.T) {
	if errs := ValidatePoolName("system", field.NewPath("p")); len(errs) != 0 {
		t.Errorf("valid name: %v", errs)
	}
	if errs := ValidatePoolName("", field.NewPath("p")); len(errs) != 1 || errs[0].Type != field.ErrorTypeRequired {
		t.Errorf("empty name: %v", errs)
	}
	if errs := ValidatePoolName("no spaces", field.NewPath("p")); len(errs) != 1 || errs[0].Type != field.ErrorTypeInvalid {
		t.Errorf("invalid name: %v", errs)
	}
}
