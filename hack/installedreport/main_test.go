package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRound(t *testing.T) {
	for _, tt := range []struct {
		name string
		line string
		want map[string]float64
		ok   bool
	}{
		{
			name: "a round as the benchmark logs it",
			line: "    installed_test.go:175: round 2: pool-scheduler 161.7 pods/s (p50 277ms, p99 781ms), pool-scheduler-unthrottled 171.9 pods/s (p50 248ms, p99 574ms), default 52.2 pods/s (p50 13.2s, p99 28.5s), default-unthrottled 167.2 pods/s (p50 252ms, p99 618ms)",
			want: map[string]float64{"pool-scheduler": 161.7, "pool-scheduler-unthrottled": 171.9, "default": 52.2, "default-unthrottled": 167.2},
			ok:   true,
		},
		{name: "another log line", line: "    installed_test.go:243: 500 nodes created in 1.2s"},
		{name: "a round without figures", line: "    installed_test.go:175: round 1: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := parseRound(tt.line)
			if ok != tt.ok {
				t.Fatalf("parseRound ok = %v, want %v", ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, r.podsPerS); ok && diff != "" {
				t.Errorf("pods/s per variant (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBenchHeader(t *testing.T) {
	for line, want := range map[string]string{
		"--- BENCH: BenchmarkInstalled/500Nodes-2":  "500Nodes",
		"--- BENCH: BenchmarkInstalled/smoke":       "smoke",
		"BenchmarkInstalled/500Nodes-2  1  1 ns/op": "",
	} {
		got := ""
		if m := benchHeader.FindStringSubmatch(line); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: workload %q, want %q", line, got, want)
		}
	}
}
