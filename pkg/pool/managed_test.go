package pool

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
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

// FuzzParseManagedLabels checks ParseManagedLabels against encoding/json: it accepts exactly a
// JSON array of strings (null, a null entry or anything else is refused) with the same keys,
// never panics, and what it accepts survives FormatManagedLabels.
func FuzzParseManagedLabels(f *testing.F) {
	for _, seed := range []string{"", "[]", `["a"]`, `["a","b"]`, `["a\/b"]`, `[1]`, `null`, `{"a":1}`, `["a",`, " [ \"a\" ] ", "[\"\x01\"]",
		`[null]`, `["a",null]`, `["a","\u00e9"]`, "[\"\xff\"]", `[["a"]]`, `["a"] ["b"]`, "\ufeff[]", `["example.com/a","example.com/b"]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseManagedLabels(s)
		if err != nil && !errors.Is(err, ErrMalformedManagedLabels) {
			t.Fatalf("%q: error %v does not wrap ErrMalformedManagedLabels", s, err)
		}
		// The reference: encoding/json into []*string, so that null entries are visible
		// (decoding into []string turns them into "").
		var ref []*string
		jsonErr := json.Unmarshal([]byte(s), &ref)
		hasNull := false
		for _, k := range ref {
			hasNull = hasNull || k == nil
		}
		switch {
		case strings.Trim(s, jsonSpace) == "":
			if err != nil || got != nil {
				t.Fatalf("blank %q: got %v, %v", s, got, err)
			}
		case jsonErr != nil || ref == nil || hasNull:
			if err == nil {
				t.Fatalf("%q: not a JSON array of strings (%v, null entry %v) but the parser accepted %q", s, jsonErr, hasNull, got)
			}
		default:
			if err != nil {
				t.Fatalf("%q: encoding/json accepts it but the parser refused: %v", s, err)
			}
			var want []string
			for _, k := range ref {
				want = append(want, *k)
			}
			if !reflect.DeepEqual(want, got) { // (cmp is slow; this runs a million times)
				t.Fatalf("%q (-json +parser):\n%s", s, cmp.Diff(want, got))
			}
		}

		if err == nil {
			// What the parser read, the labeler writes back unchanged.
			again, err := ParseManagedLabels(FormatManagedLabels(got))
			if err != nil {
				t.Fatalf("%q: FormatManagedLabels(%q) does not parse: %v", s, got, err)
			}
			if !reflect.DeepEqual(got, again) {
				t.Fatalf("%q: format/parse round trip (-parsed +round trip):\n%s", s, cmp.Diff(got, again))
			}
		}
	})
}

func TestLabelled(t *testing.T) {
	tests := []struct {
		annotation string
		present    bool
		want       bool
	}{
		{present: false, want: false},
		{annotation: "", present: true, want: false},
		// The nodepool-labels-operator writes [] on every node of a pool without a set of its own.
		{annotation: "[]", present: true, want: false},
		{annotation: " [ ] ", present: true, want: false},
		{annotation: `["node.banzaicloud.io/cpu","nodepool.banzaicloud.io/name"]`, present: true, want: true},
		{annotation: ` ["a"] `, present: true, want: true},
		{annotation: "null", present: true, want: false},
		{annotation: `"a"`, present: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.annotation, func(t *testing.T) {
			annotations := map[string]string{}
			if tt.present {
				annotations[ManagedLabelsAnnotation] = tt.annotation
			}
			if got := Labelled(annotations); got != tt.want {
				t.Errorf("Labelled(%q) = %v, want %v", tt.annotation, got, tt.want)
			}
		})
	}
}
