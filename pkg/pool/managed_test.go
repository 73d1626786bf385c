package pool

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseManagedLabels(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		want       []string
		wantErr    bool
	}{
		{name: "empty value", annotation: "", want: nil},
		{name: "blank value", annotation: "  ", want: nil},
		{name: "empty array", annotation: "[]", want: nil},
		{name: "empty array with spaces", annotation: " [ ] ", want: nil},
		{name: "one key", annotation: `["example.com/a"]`, want: []string{"example.com/a"}},
		{name: "banzai format", annotation: `["node.banzaicloud.io/ondemand","example.com/team"]`, want: []string{"node.banzaicloud.io/ondemand", "example.com/team"}},
		{name: "whitespace", annotation: "[ \"a\" ,\n\t\"b\" ]", want: []string{"a", "b"}},
		{name: "escaped slash", annotation: `["example.com\/a"]`, want: []string{"example.com/a"}},
		{name: "unicode escape", annotation: `["\u0061"]`, want: []string{"a"}},
		{name: "not json", annotation: "example.com/a", wantErr: true},
		{name: "object", annotation: `{"a":"b"}`, wantErr: true},
		{name: "null", annotation: "null", wantErr: true},
		{name: "numbers", annotation: `[1,2]`, wantErr: true},
		{name: "unterminated", annotation: `["a",`, wantErr: true},
		{name: "unterminated string", annotation: `["a]`, wantErr: true},
		{name: "trailing comma", annotation: `["a",]`, wantErr: true},
		{name: "missing comma", annotation: `["a" "b"]`, wantErr: true},
		{name: "trailing garbage", annotation: `["a"]x`, wantErr: true},
		{name: "control character", annotation: "[\"a\nb\"]", wantErr: true},
		{name: "escaped garbage", annotation: `["a\x"]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseManagedLabels(tt.annotation)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseManagedLabels(%q) error = %v, wantErr %v", tt.annotation, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMalformedManagedLabels) {
				t.Errorf("error %v does not wrap ErrMalformedManagedLabels", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseManagedLabels(%q) (-want +got):\n%s", tt.annotation, diff)
			}
		})
	}
}

func TestEachManagedLabelStopsEarly(t *testing.T) {
	var seen []string
	err := EachManagedLabel(`["a","b","c"]`, func(k string) bool {
		seen = append(seen, k)
		return k != "b"
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, seen); diff != "" {
		t.Errorf("keys visited (-want +got):\n%s", diff)
	}
}

func TestFormatManagedLabelsRoundTrip(t *testing.T) {
	for _, keys := range [][]string{nil, {}, {"a"}, {"example.com/a", "b"}} {
		got, err := ParseManagedLabels(FormatManagedLabels(keys))
		if err != nil {
			t.Fatalf("round trip of %v: %v", keys, err)
		}
		if len(keys) == 0 {
			keys = nil
		}
		if diff := cmp.Diff(keys, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	if got := FormatManagedLabels(nil); got != "[]" {
		t.Errorf("FormatManagedLabels(nil) = %q, want []", got)
	}
}

func TestEachManagedLabelDoesNotAllocate(t *testing.T) {
	annotation := `["example.com/a","example.com/b","example.com/c"]`
	n := 0
	if allocs := testing.AllocsPerRun(100, func() {
		_ = EachManagedLabel(annotation, func(string) bool { n++; return true })
	}); allocs != 0 {
		t.Errorf("EachManagedLabel allocates %v times per call", allocs)
	}
}

// FuzzParseManagedLabels checks the in-place scanner against encoding/json: both must accept
// the same values and yield the same keys, and neither may panic.
func FuzzParseManagedLabels(f *testing.F) {
	for _, seed := range []string{"", "[]", `["a"]`, `["a","b"]`, `["a\/b"]`, `[1]`, `null`, `{"a":1}`, `["a",`, " [ \"a\" ] ", "[\"\x01\"]"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseManagedLabels(s)
		var want []string
		jsonErr := json.Unmarshal([]byte(s), &want)
		trimmedEmpty := trimJSONSpace(s) == ""
		switch {
		case trimmedEmpty:
			if err != nil || got != nil {
				t.Fatalf("blank %q: got %v, %v", s, got, err)
			}
		case jsonErr != nil || want == nil:
			if err == nil {
				t.Fatalf("%q: encoding/json refuses it (%v) but the parser accepted %q", s, jsonErr, got)
			}
		default:
			if err != nil {
				t.Fatalf("%q: encoding/json accepts it (%q) but the parser refused: %v", s, want, err)
			}
			if len(want) == 0 {
				want = nil
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q (-json +parser):\n%s", s, diff)
			}
		}
	})
}
