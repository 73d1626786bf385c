package main

import (
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
