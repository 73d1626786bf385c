package simulate

import (
	"strings"
	"testing"
)

func TestBuiltinScenariosParse(t *testing.T) {
	names := BuiltinNames()
	if len(names) < 3 {
		t.Fatalf("built-in scenarios: %v", names)
	}
	for _, name := range names {
		if _, err := Load(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseErrorsNameTheLineAndField(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// want are substrings of the error.
		want []string
	}{
		{
			name: "unknown field",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n  node: 2\n",
			want: []string{"bad.yaml", "line 5", "field node not found"},
		},
		{
			name: "invalid value",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n- name: b\n  nodes: 0\n",
			want: []string{"bad.yaml:6:", "pools[1].nodes"},
		},
		{
			name: "invalid label in a label set",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n  labelSet:\n    kubernetes.io/arch: arm64\n",
			want: []string{"bad.yaml:6:", "pools[0].labelSet[kubernetes.io/arch]", "reserved"},
		},
		{
			name: "bad taint effect",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\n  taints:\n  - key: k\n    effect: Sometimes\n",
			want: []string{"bad.yaml:7:", "pools[0].taints[0].effect"},
		},
		{
			name: "service naming an unknown workload",
			yaml: "name: x\npools:\n- name: a\n  nodes: 1\nservices:\n- name: lb\n  workload: nope\n",
			want: []string{"bad.yaml:7:", "services[0].workload"},
		},
		{
			name: "bad duration",
			yaml: "name: x\npools:\n- name: a\n  joiningNodes: 1\n  joinAfter: soon\n",
			want: []string{"line 5", "not a duration"},
		},
		{
			name: "not YAML",
			yaml: "name: [x\n",
			want: []string{"bad.yaml", "line"},
		},
		{
			name: "missing name and pools",
			yaml: "description: nothing\n",
			want: []string{"bad.yaml:1:", "name: Required", "pools: Required"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadUnknownScenario(t *testing.T) {
	_, err := Load("no-such-scenario")
	if err == nil || !strings.Contains(err.Error(), "late-labels") {
		t.Fatalf("error %v should list the built-in scenarios", err)
	}
}
