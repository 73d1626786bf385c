package spread

import "testing"

// TestSkew: the fullest domain minus the emptiest, an empty domain counting as 0.
func TestSkew(t *testing.T) {
	tests := []struct {
		name   string
		counts map[string]int
		want   int
	}{
		{name: "no domain", want: 0},
		{name: "one domain", counts: map[string]int{"a": 3}, want: 0},
		{name: "balanced", counts: map[string]int{"a": 2, "b": 2, "c": 2}, want: 0},
		{name: "uneven", counts: map[string]int{"a": 4, "b": 1, "c": 2}, want: 3},
		{name: "an empty domain", counts: map[string]int{"a": 2, "b": 0}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Skew(tt.counts); got != tt.want {
				t.Errorf("Skew(%v) = %d, want %d", tt.counts, got, tt.want)
			}
		})
	}
}
