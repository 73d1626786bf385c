package main

import "testing"

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
