// Package simulate runs a scenario cluster twice on an embedded control plane, once under the
// default kube-scheduler profile and once under pool-scheduler's shipped profile (the real
// scheduler code in both), and measures both with pkg/report.
package simulate

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// Scenario describes a cluster and a workload. The schema is documented in docs/scenarios.md;
// the built-in scenarios are in scenarios/.
type Scenario struct {
	Name        string     `yaml:"name"`
	Description string     `yaml:"description"`
	Pools       []Pool     `yaml:"pools"`
	Workloads   []Workload `yaml:"workloads"`
	Services    []Service  `yaml:"services"`

	source string
}

// Pool is a set of identical nodes.
type Pool struct {
	Name string `yaml:"name"`
	// Nodes in the pool at the start; JoiningNodes join after JoinAfter, carrying only their
	// pool label until LabelDelay later (as an asynchronous labeler would apply them).
	Nodes        int      `yaml:"nodes"`
	JoiningNodes int      `yaml:"joiningNodes"`
	JoinAfter    Duration `yaml:"joinAfter"`
	LabelDelay   Duration `yaml:"labelDelay"`
	// PoolLabelKey names the pool on the node (default kubernetes.azure.com/agentpool).
	PoolLabelKey string            `yaml:"poolLabelKey"`
	Labels       map[string]string `yaml:"labels"`
	// LabelSet is the pool's NodePoolLabelSet: desired labels.
	LabelSet map[string]string `yaml:"labelSet"`
	Taints   []Taint           `yaml:"taints"`
	// FaultDomains and UpdateDomains number the nodes round-robin (0: no label).
	FaultDomains  int `yaml:"faultDomains"`
	UpdateDomains int `yaml:"updateDomains"`
	// CPU, Memory and Pods are each node's capacity (defaults 4, 16Gi, 110).
	CPU    string `yaml:"cpu"`
	Memory string `yaml:"memory"`
	Pods   int    `yaml:"pods"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
}

// Workload is a number of ReplicaSets whose pods are created one by one.
type Workload struct {
	Name        string `yaml:"name"`
	Namespace   string `yaml:"namespace"`
	ReplicaSets int    `yaml:"replicaSets"`
	Replicas    int    `yaml:"replicas"`
	// StartAfter delays the first pod, e.g. to overlap with nodes joining.
	StartAfter Duration `yaml:"startAfter"`
	// CPU is each pod's request (default 100m).
	CPU string `yaml:"cpu"`
	// TolerateAll gives the pods a wildcard toleration, as many charts do.
	TolerateAll bool `yaml:"tolerateAll"`
	// PriorityClassName, e.g. system-cluster-critical.
	PriorityClassName string `yaml:"priorityClassName"`
	// AvoidLabels: required node affinity NotIn for each key (the pod must avoid nodes carrying
	// these label values, e.g. a spot pool).
	AvoidLabels map[string]string `yaml:"avoidLabels"`
	// RequireLabels is a node selector (the pod needs these labels, e.g. the spot pool's).
	RequireLabels map[string]string `yaml:"requireLabels"`
	// Rollout replaces every ReplicaSet once all its pods are bound: the old pods are left
	// terminating (a finalizer holds them) while the new revision is scheduled.
	Rollout bool `yaml:"rollout"`
}

// Service is a LoadBalancer Service with externalTrafficPolicy Local selecting a workload.
type Service struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	Workload  string `yaml:"workload"`
	// BackendPools are the pools behind the load balancer (the Azure load-balancer-mode annotation).
	BackendPools []string `yaml:"backendPools"`
}

// Duration is a time.Duration written as "2s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 2s or 500ms", n.Line, s)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

//go:embed scenarios/*.yaml
var builtin embed.FS

// BuiltinNames lists the built-in scenarios.
func BuiltinNames() []string {
	entries, _ := fs.ReadDir(builtin, "scenarios")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Load reads a scenario by built-in name or file path.
func Load(nameOrPath string) (*Scenario, error) {
	data, err := builtin.ReadFile(path.Join("scenarios", nameOrPath+".yaml"))
	source := nameOrPath + ".yaml (built-in)"
	if err != nil {
		if data, err = os.ReadFile(nameOrPath); err != nil {
			return nil, fmt.Errorf("scenario %q is neither a built-in (%s) nor a readable file: %w", nameOrPath, strings.Join(BuiltinNames(), ", "), err)
		}
		source = nameOrPath
	}
	return Parse(source, data)
}

// Parse decodes and validates a scenario strictly; errors name the source, line and field.
func Parse(source string, data []byte) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	s := &Scenario{source: source}
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	s.setDefaults()
	if errs := s.validate(); len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			line := lineOf(&root, e.Field)
			msgs = append(msgs, fmt.Sprintf("%s:%d: %s", source, line, e.Error()))
		}
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	return s, nil
}

func (s *Scenario) setDefaults() {
	for i := range s.Pools {
		p := &s.Pools[i]
		if p.PoolLabelKey == "" {
			p.PoolLabelKey = "kubernetes.azure.com/agentpool"
		}
		if p.CPU == "" {
			p.CPU = "4"
		}
		if p.Memory == "" {
			p.Memory = "16Gi"
		}
		if p.Pods == 0 {
			p.Pods = 110
		}
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		if w.Namespace == "" {
			w.Namespace = "default"
		}
		if w.CPU == "" {
			w.CPU = "100m"
		}
		if w.ReplicaSets == 0 {
			w.ReplicaSets = 1
		}
	}
	for i := range s.Services {
		if s.Services[i].Namespace == "" {
			s.Services[i].Namespace = "default"
		}
	}
}

func (s *Scenario) validate() field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), "a scenario needs a name"))
	}
	if len(s.Pools) == 0 {
		errs = append(errs, field.Required(field.NewPath("pools"), "at least one pool"))
	}
	pools := map[string]bool{}
	for i, p := range s.Pools {
		fp := field.NewPath("pools").Index(i)
		errs = append(errs, pool.ValidateName(p.Name, fp.Child("name"))...)
		if pools[p.Name] {
			errs = append(errs, field.Duplicate(fp.Child("name"), p.Name))
		}
		pools[p.Name] = true
		if p.Nodes < 0 || p.JoiningNodes < 0 || p.Nodes+p.JoiningNodes == 0 || p.Nodes+p.JoiningNodes > 5000 {
			errs = append(errs, field.Invalid(fp.Child("nodes"), p.Nodes, "nodes + joiningNodes must be 1..5000"))
		}
		if p.FaultDomains < 0 || p.UpdateDomains < 0 {
			errs = append(errs, field.Invalid(fp.Child("faultDomains"), p.FaultDomains, "must not be negative"))
		}
		for _, msg := range validation.IsQualifiedName(p.PoolLabelKey) {
			errs = append(errs, field.Invalid(fp.Child("poolLabelKey"), p.PoolLabelKey, msg))
		}
		errs = append(errs, validateLabels(p.Labels, fp.Child("labels"))...)
		errs = append(errs, validateLabels(p.LabelSet, fp.Child("labelSet"))...)
		for j, t := range p.Taints {
			switch v1.TaintEffect(t.Effect) {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				errs = append(errs, field.NotSupported(fp.Child("taints").Index(j).Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
			}
		}
		for name, q := range map[string]string{"cpu": p.CPU, "memory": p.Memory} {
			if _, err := resource.ParseQuantity(q); err != nil {
				errs = append(errs, field.Invalid(fp.Child(name), q, err.Error()))
			}
		}
	}
	workloads := map[string]bool{}
	for i, w := range s.Workloads {
		fp := field.NewPath("workloads").Index(i)
		for _, msg := range validation.IsDNS1123Label(w.Name) {
			errs = append(errs, field.Invalid(fp.Child("name"), w.Name, msg))
		}
		workloads[w.Name] = true
		if w.Replicas < 1 || w.Replicas > 1000 {
			errs = append(errs, field.Invalid(fp.Child("replicas"), w.Replicas, "must be 1..1000"))
		}
		if w.ReplicaSets < 1 || w.ReplicaSets > 2000 {
			errs = append(errs, field.Invalid(fp.Child("replicaSets"), w.ReplicaSets, "must be 1..2000"))
		}
		if _, err := resource.ParseQuantity(w.CPU); err != nil {
			errs = append(errs, field.Invalid(fp.Child("cpu"), w.CPU, err.Error()))
		}
		errs = append(errs, validateLabels(w.AvoidLabels, fp.Child("avoidLabels"))...)
		errs = append(errs, validateLabels(w.RequireLabels, fp.Child("requireLabels"))...)
	}
	for i, svc := range s.Services {
		fp := field.NewPath("services").Index(i)
		for _, msg := range validation.IsDNS1035Label(svc.Name) {
			errs = append(errs, field.Invalid(fp.Child("name"), svc.Name, msg))
		}
		if !workloads[svc.Workload] {
			errs = append(errs, field.NotFound(fp.Child("workload"), svc.Workload))
		}
		for j, p := range svc.BackendPools {
			if !pools[p] {
				errs = append(errs, field.NotFound(fp.Child("backendPools").Index(j), p))
			}
		}
	}
	return errs
}

func validateLabels(labels map[string]string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range labels {
		for _, msg := range pool.ValidateLabel(k, v) {
			errs = append(errs, field.Invalid(fp.Key(k), v, msg))
		}
	}
	return errs
}

// lineOf finds the line of a field path such as pools[1].labelSet[example.com/x] in the YAML
// tree: the deepest node that exists on the path.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, seg := range splitPath(path) {
		next := child(n, seg)
		if next == nil {
			break
		}
		n, line = next, next.Line
	}
	return line
}

func splitPath(p string) []string {
	var segs []string
	for _, part := range strings.Split(p, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				segs = append(segs, part)
				break
			}
			if i > 0 {
				segs = append(segs, part[:i])
			}
			j := strings.IndexByte(part, ']')
			if j < 0 {
				break
			}
			segs = append(segs, "["+part[i+1:j])
			part = part[j+1:]
		}
	}
	return segs
}

func child(n *yaml.Node, seg string) *yaml.Node {
	key := strings.TrimPrefix(seg, "[")
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				if strings.HasPrefix(seg, "[") {
					return n.Content[i] // a map key: point at the key itself
				}
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}
