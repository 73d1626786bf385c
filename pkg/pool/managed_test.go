package pool

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
// the same values (a JSON array of strings; null, a null entry or anything else is refused) and
// yield the same keys, and neither may panic. EachManagedLabel, which the scheduler calls, must
// agree with ParseManagedLabels, and what it accepts must survive FormatManagedLabels.
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
		case trimJSONSpace(s) == "":
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

		// EachManagedLabel, the allocation-free path, fails exactly when the parser does and
		// visits exactly the parsed keys (leading keys possibly twice, as documented).
		seen := map[string]bool{}
		eachErr := EachManagedLabel(s, func(k string) bool { seen[k] = true; return true })
		if (eachErr != nil) != (err != nil) {
			t.Fatalf("%q: EachManagedLabel error %v, ParseManagedLabels error %v", s, eachErr, err)
		}
		if err == nil {
			want := map[string]bool{}
			for _, k := range got {
				want[k] = true
			}
			if len(want) != len(seen) || (len(seen) > 0 && !reflect.DeepEqual(want, seen)) {
				t.Fatalf("%q: keys visited by EachManagedLabel (-parsed +visited):\n%s", s, cmp.Diff(want, seen, cmpopts.EquateEmpty()))
			}
			// Stopping at the first key stops there.
			var first []string
			_ = EachManagedLabel(s, func(k string) bool { first = append(first, k); return false })
			if len(got) > 0 && (len(first) == 0 || first[len(first)-1] != got[0]) {
				t.Fatalf("%q: stopping at the first key visited %q, want it to end with %q", s, first, got[0])
			}
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

// BenchmarkEachManagedLabel compares the in-place scanner with encoding/json (the path values
// with escapes take) on the annotations a labeler writes.
func BenchmarkEachManagedLabel(b *testing.B) {
	annotations := map[string]string{
		"3 keys": `["example.com/lifecycle","example.com/team","example.com/tier"]`,
		"banzai": `["node.banzaicloud.io/cpu","node.banzaicloud.io/memory","node.banzaicloud.io/ondemand","nodepool.banzaicloud.io/name","node.banzaicloud.io/NetworkPerfCategory"]`,
	}
	for name, a := range annotations {
		for impl, each := range map[string]func(string, func(string) bool) error{
			"scanner":       EachManagedLabel,
			"encoding-json": func(a string, fn func(string) bool) error { return eachManagedLabelSlow(trimJSONSpace(a), fn) },
		} {
			b.Run(name+"/"+impl, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = each(a, func(string) bool { return true })
				}
			})
		}
	}
}
