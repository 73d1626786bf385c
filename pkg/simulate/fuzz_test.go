package simulate

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// toInternal defaults a v1 object and converts it to the internal type, as the apiserver does
// before validating it.
func toInternal(t *testing.T, in runtime.Object, out runtime.Object) {
	t.Helper()
	legacyscheme.Scheme.Default(in)
	if err := legacyscheme.Scheme.Convert(in, out, nil); err != nil {
		t.Fatalf("converting %T: %v", in, err)
	}
}

// apiserverErrors builds the objects simulate creates for a scenario (the first and last node
// of every pool, labelled and not, its NodePoolLabelSet, the first and last ReplicaSet of every
// workload in both revisions with their first and last pod, the Services and the namespaces) and
// returns what the apiserver's validation says about them.
func apiserverErrors(t *testing.T, s *Scenario) []string {
	var problems []string
	report := func(what string, errs field.ErrorList) {
		for _, e := range errs {
			problems = append(problems, fmt.Sprintf("%s: %v", what, e))
		}
	}
	for i := range s.Pools {
		p := &s.Pools[i]
		for _, j := range []int{0, p.Nodes + p.JoiningNodes - 1} {
			for _, labelled := range []bool{false, true} {
				node := s.buildNode(p, j, labelled)
				var in api.Node
				toInternal(t, node, &in)
				report("node "+node.Name, corevalidation.ValidateNode(&in))
			}
		}
		set := labelSetOf(p)
		// What the CRD checks: a DNS-subdomain name and the labels (pool.ValidateLabel is kept
		// in step with the CRD's rules by pkg/pool's fuzz test).
		for _, msg := range validation.IsDNS1123Subdomain(set.Name) {
			problems = append(problems, fmt.Sprintf("NodePoolLabelSet %q: %s", set.Name, msg))
		}
		for k, v := range set.Spec.Labels {
			for _, msg := range pool.ValidateLabel(k, string(v)) {
				problems = append(problems, fmt.Sprintf("NodePoolLabelSet %q label %q: %s", set.Name, k, msg))
			}
		}
	}
	namespaces := map[string]bool{labelSetNS: true}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		namespaces[w.Namespace] = true
		for _, n := range []int{0, w.ReplicaSets - 1} {
			for _, revision := range []int{1, 2} {
				rs := replicaSet(w, n, revision)
				rs.UID = "00000000-0000-0000-0000-000000000001" // as created by the apiserver
				var in apps.ReplicaSet
				toInternal(t, rs, &in)
				report("replicaset "+rs.Name, appsvalidation.ValidateReplicaSet(&in, podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil)))
				for _, j := range []int{0, w.Replicas - 1} {
					pod := replica(w, rs, j, "pool-scheduler")
					var in api.Pod
					toInternal(t, pod, &in)
					report("pod "+pod.Name, corevalidation.ValidatePodCreate(&in, podutil.GetValidationOptionsFromPodSpecAndMeta(&in.Spec, nil, &in.ObjectMeta, nil)))
				}
			}
		}
	}
	for i := range s.Services {
		namespaces[s.Services[i].Namespace] = true
		svc := service(&s.Services[i])
		var in api.Service
		toInternal(t, svc, &in)
		// The REST strategy sets these before validation; a scenario has no say in them.
		in.Spec.IPFamilies = []api.IPFamily{api.IPv4Protocol}
		in.Spec.IPFamilyPolicy = ptr.To(api.IPFamilyPolicySingleStack)
		in.Spec.ClusterIP, in.Spec.ClusterIPs = "10.0.0.10", []string{"10.0.0.10"}
		in.Spec.Ports[0].NodePort = 30000
		in.Spec.HealthCheckNodePort = 30001
		report("service "+svc.Name, corevalidation.ValidateServiceCreate(&in))
	}
	for ns := range namespaces {
		report("namespace "+ns, corevalidation.ValidateNamespace(&api.Namespace{ObjectMeta: metaWithName(ns)}))
	}
	return problems
}

// validationLine matches one validation error of Parse: "<source>:<line>: <field>: <detail>".
var validationLine = regexp.MustCompile(`^fuzz\.yaml:(\d+): `)

// FuzzParseScenario fuzzes `poolctl simulate` scenario files. Properties: Parse never panics
// and is deterministic (same result, same message); decoding errors about a field (unknown
// field, wrong type, bad duration) carry its line; every validation error carries a line of the
// file; and a scenario Parse accepts is one simulate can run: every object it creates passes
// the apiserver's validation, and its sizes stay within the documented limits.
func FuzzParseScenario(f *testing.F) {
	for _, name := range BuiltinNames() {
		data, err := builtin.ReadFile("scenarios/" + name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		"",
		"# only a comment\n",
		"name: x\npools:\n- name: a\n  nodes: 1\n",
		"name: x\npools:\n- name: a\n  nodes: 1\n  node: 2\n",
		"name: x\npools:\n- name: a\n  nodes: 9223372036854775807\n  joiningNodes: 1\n",
		"name: x\npools:\n- name: a\n  nodes: 1\n  faultDomains: 2\n  updateDomains: -1\n",
		"name: x\npools:\n- name: Pool_A\n  nodes: 1\n  pods: -1\n  cpu: \"-4\"\n",
		"name: x\npools:\n- name: a\n  nodes: 1\n  taints:\n  - {key: \"bad key\", value: \"not valid!\", effect: NoSchedule}\n",
		"name: x\npools:\n- name: a\n  nodes: 1\n  labels:\n    example.com/a: \"1\"\n    \"bad key\": \"1\"\n",
		"name: x\npools:\n- name: a\n  nodes: 1\n  labelSet: {kubernetes.io/arch: arm64, example.com/x: \"not valid!\"}\n",
		"name: x\npools:\n- name: a\n  nodes: 1\nworkloads:\n- name: w\n  namespace: Bad_NS\n  replicas: 1\n  priorityClassName: \"Not A Class\"\n- name: w\n  replicas: 1\n",
		"name: x\npools:\n- name: a\n  nodes: 1\nworkloads:\n- name: " + strings.Repeat("w", 63) + "\n  replicas: 1\n",
		"name: x\npools:\n- name: a\n  nodes: 1\nworkloads:\n- name: w\n  replicas: 1\n  cpu: lots\n  startAfter: soon\nservices:\n- name: lb\n  workload: w\n  namespace: other\n  backendPools: [b]\n- name: lb\n  workload: w\n",
		"name: x\npools:\n- &p {name: a, nodes: 1}\n- *p\n",
		"name: x\npools:\n- name: a\n  nodes: one\n",
		"name: [x\n",
		"{name: x, pools: [{name: a, nodes: 1, joiningNodes: 2, joinAfter: 1s, labelDelay: -1s}]}",
		"name: x\npools:\n- name: a\n  nodes: 3\nworkloads:\n- name: w\n  replicas: 3\n  pdb: {minAvailable: 99999999999}\nmaintenance:\n  pool: a\n  maxSurge: 200%\n  timeScale: .nan\n",
		"name: x\npools:\n- name: a\n  nodes: 3\nmaintenance:\n  kind: blueGreen\n  pool: a\n  budget: 1\n  batchSoak: -1s\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		s2, err2 := Parse("fuzz.yaml", data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Parse is not deterministic: %v, then %v", err, err2)
		}
		if err != nil {
			checkErrorLines(t, data, err)
			return
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("Parse is not deterministic:\n%+v\n%+v", s, s2)
		}
		for i, p := range s.Pools {
			if p.Nodes < 0 || p.JoiningNodes < 0 || p.Nodes+p.JoiningNodes < 1 || p.Nodes+p.JoiningNodes > 5000 {
				t.Fatalf("pools[%d]: %d nodes + %d joining accepted (limit 1..5000)", i, p.Nodes, p.JoiningNodes)
			}
		}
		if problems := apiserverErrors(t, s); len(problems) > 0 {
			t.Fatalf("Parse accepted a scenario the apiserver refuses:\n%s\n--- scenario:\n%s", strings.Join(problems, "\n"), data)
		}
	})
}

// checkErrorLines checks the line numbers of a Parse error.
func checkErrorLines(t *testing.T, data []byte, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, "fuzz.yaml:") {
		t.Fatalf("error %q does not name the file", msg)
	}
	lines := lineCount(data)
	var typeErr *yaml.TypeError
	switch {
	case errors.As(err, &typeErr):
		// Unknown fields, wrong types and bad durations: each names its line.
		for _, e := range typeErr.Errors {
			if !strings.Contains(e, "line ") {
				t.Fatalf("decoding error %q does not carry a line", e)
			}
		}
	case validationLine.MatchString(msg):
		// Validation errors, one per line (a value may contain a newline, so only lines that
		// start like an error are checked, and the first one must).
		for _, l := range strings.Split(msg, "\n") {
			m := validationLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			var n int
			fmt.Sscan(m[1], &n)
			if n < 1 || n > lines {
				t.Fatalf("validation error %q points at line %d; the file has %d", l, n, lines)
			}
		}
	}
}

// TestParseErrorLinePointsAtTheKey: an invalid map key is reported on its own line, also when
// it contains dots (label keys do) and is not the map's first key.
func TestParseErrorLinePointsAtTheKey(t *testing.T) {
	data := "name: x\npools:\n- name: a\n  nodes: 1\n  labelSet:\n    example.com/ok: \"1\"\n    kubernetes.io/arch: arm64\n"
	_, err := Parse("f.yaml", []byte(data))
	if err == nil || !strings.HasPrefix(err.Error(), "f.yaml:7: pools[0].labelSet[kubernetes.io/arch]") {
		t.Fatalf("error = %v, want it on line 7, naming pools[0].labelSet[kubernetes.io/arch]", err)
	}
}

func metaWithName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
