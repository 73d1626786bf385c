package main

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPerRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b []float64
		want string
	}{
		{name: "paired", a: []float64{100, 150}, b: []float64{200, 100}, want: "0.50, 1.50"},
		{name: "a run missing", a: []float64{100}, b: []float64{100, 120}, want: "1.00, (unpaired: 1 against 2 runs)"},
		{name: "zero throughput left out", a: []float64{100, 90}, b: []float64{0, 100}, want: "0.90"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := perRun(tt.a, tt.b); got != tt.want {
				t.Errorf("perRun(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestFamilies(t *testing.T) {
	cases := map[string]*result{}
	for _, tc := range []string{
		"pool-scheduler", "default", "floor", "pool-scheduler-admitted", "intree-equivalent", "degraded",
		"pools-pinned-pool-scheduler", "pools-pinned-default", "pools-pinned-intree-equivalent",
		"pools-unpinned-pool-scheduler", "pools-unpinned-default",
	} {
		cases[tc] = &result{}
	}
	got := familiesOf(cases)
	want := []family{
		{name: "", cases: []string{"floor", "default", "intree-equivalent", "degraded", "pool-scheduler", "pool-scheduler-admitted"}},
		{name: "pools-pinned-", cases: []string{"pools-pinned-default", "pools-pinned-intree-equivalent", "pools-pinned-pool-scheduler"}},
		{name: "pools-unpinned-", cases: []string{"pools-unpinned-default", "pools-unpinned-pool-scheduler"}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(family{})); diff != "" {
		t.Errorf("familiesOf (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		family, tc string
		ours       bool
	}{
		{"", "pool-scheduler", true},
		{"", "pool-scheduler-admitted", true},
		{"", "default", false},
		{"pools-pinned-", "pools-pinned-pool-scheduler", true},
		{"pools-pinned-", "pools-pinned-intree-equivalent", false},
	} {
		if got := isOurs(tt.family, tt.tc); got != tt.ours {
			t.Errorf("isOurs(%q, %q) = %v, want %v", tt.family, tt.tc, got, tt.ours)
		}
	}
}

// TestPairInterval: the per-pair ratio's geometric mean and 95% interval (expected values from
// Python's statistics module on the same logs, t from a table), runs paired by index.
func TestPairInterval(t *testing.T) {
	for _, tt := range []struct {
		name       string
		a, b       []float64
		gm, lo, hi float64
		n          int
		wantString string
	}{
		{name: "three pairs around 1", a: []float64{110, 90, 100}, b: []float64{100, 100, 100}, gm: 0.9967, lo: 0.7767, hi: 1.2789, n: 3,
			wantString: "1.00 [0.78, 1.28], 3 pairs"},
		{name: "four pairs around 2", a: []float64{2, 2.2, 1.8, 2.1}, b: []float64{1, 1, 1, 1}, gm: 2.0195, lo: 1.7612, hi: 2.3156, n: 4,
			wantString: "2.02 [1.76, 2.32], 4 pairs"},
		{name: "a failed run left out", a: []float64{0, 110, 90, 100}, b: []float64{100, 100, 100, 100}, gm: 0.9967, lo: 0.7767, hi: 1.2789, n: 3,
			wantString: "1.00 [0.78, 1.28], 3 pairs"},
		{name: "one pair: no interval", a: []float64{150}, b: []float64{100}, gm: 1.5, lo: 1.5, hi: 1.5, n: 1, wantString: "1.50 (1 pair: no interval)"},
		{name: "none", wantString: "-"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			iv := pairInterval(tt.a, tt.b)
			near := func(got, want float64) bool { return math.Abs(got-want) < 5e-4 }
			if iv.n != tt.n || !near(iv.gm, tt.gm) || !near(iv.lo, tt.lo) || !near(iv.hi, tt.hi) {
				t.Errorf("pairInterval = %+v, want gm %.4f [%.4f, %.4f] over %d", iv, tt.gm, tt.lo, tt.hi, tt.n)
			}
			if got := iv.String(); got != tt.wantString {
				t.Errorf("String() = %q, want %q", got, tt.wantString)
			}
		})
	}
}

// TestTQuantile975: the table, and the expansion beyond it close to the exact quantiles
// (scipy.stats.t.ppf(0.975, df): 40 -> 2.0211, 100 -> 1.9840, 1000 -> 1.9623).
func TestTQuantile975(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 2: 4.303, 30: 2.042, 40: 2.0211, 100: 1.9840, 1000: 1.9623} {
		if got := tQuantile975(df); math.Abs(got-want) > 1e-3 {
			t.Errorf("tQuantile975(%d) = %.4f, want %.4f", df, got, want)
		}
	}
}

// TestRatiosConverge: make bench runs pairs until every pool-scheduler / default interval is
// within the width; the other baselines are reported but do not hold it up.
func TestRatiosConverge(t *testing.T) {
	results := map[string]*result{
		"default":        {throughput: []float64{100, 100, 100}},
		"pool-scheduler": {throughput: []float64{101, 99, 100}},
		"floor":          {throughput: []float64{300, 100, 200}},
	}
	rs := ratiosOf(familiesOf(results), results)
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%s/%s default=%v within0.06=%v", r.ours, r.other, r.againstDefault, r.iv.within(0.06)))
	}
	want := []string{
		"pool-scheduler/floor default=false within0.06=false",
		"pool-scheduler/default default=true within0.06=true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	results["pool-scheduler"].throughput = []float64{110, 90, 100}
	if rs := ratiosOf(familiesOf(results), results); rs[1].iv.within(0.06) {
		t.Errorf("pairs 1.10, 0.90, 1.00: interval %s reported within 0.06", rs[1].iv)
	}
}
