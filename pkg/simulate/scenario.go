// Package simulate runs a scenario cluster twice on an embedded control plane, once under the
// default kube-scheduler profile and once under pool-scheduler's shipped profile (the real
// scheduler code in both), and measures both with pkg/report. It holds the scenario language,
// the runs, their rendering (table and HTML page) and the maintenance goals; a maintenance
// scenario's operation is filled into a pkg/aksemu UpgradePlan, which aksemu plays.
package simulate

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
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

	configvalidation "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
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
	// Azure, if set, names nodes and their availability sets / scale sets as AKS does, gives
	// them Azure providerIDs and models Azure's load balancer for the report.
	Azure *Azure `yaml:"azure"`
	// OptInByLabel: in pool-scheduler's run, the workloads' namespaces (but kube-system) are
	// labelled pool-scheduler.io/enabled=true and their pods are created without schedulerName;
	// the MutatingAdmissionPolicy rendered from the profile gives them to pool-scheduler, as the
	// chart's admission path does. kube-system's pods name the scheduler, as add-ons name theirs.
	OptInByLabel bool `yaml:"optInByLabel"`
	// Maintenance, if set, plays a platform maintenance on a pool once every workload is Ready
	// (docs/scenarios.md); the workloads are then ReplicaSets kept by the ReplicaSet controller.
	Maintenance *Maintenance `yaml:"maintenance"`

	source string
}

// Azure describes the scenario's cluster as AKS builds it.
type Azure struct {
	// ClusterHash is the 8-digit suffix AKS puts in node and availability-set names (default 27255451).
	ClusterHash string `yaml:"clusterHash"`
	// Region prefixes zone labels of zonal pools: <region>-<zone> (default westeurope).
	Region string `yaml:"region"`
	// LoadBalancerSKU is Standard (default) or Basic.
	LoadBalancerSKU string `yaml:"loadBalancerSku"`
	// PrimaryPool is the pool whose availability set or scale set a Basic load balancer uses
	// when a Service names none (cloud-provider-azure's primaryAvailabilitySetName).
	PrimaryPool string `yaml:"primaryPool"`
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
	// FaultDomains and UpdateDomains number the nodes round-robin (0: no label). Fault domains
	// go to the zone label, as cloud-provider-azure writes them for VMs outside zones, and to
	// pool-labeler's fault-domain label. With azure, a pool outside zones always has a zone
	// label: faultDomains 0 is a scale set's default fault-domain count 1 (zone "0" on every
	// node); a virtualMachines pool's VMs report fault and update domain 0 (docs/azure.md).
	FaultDomains  int `yaml:"faultDomains"`
	UpdateDomains int `yaml:"updateDomains"`
	// Zones makes the pool zonal: nodes round-robin over zones <region>-1..<region>-N (the zone
	// label as cloud-provider-azure writes it); pool-labeler writes no fault-domain label there.
	Zones int `yaml:"zones"`
	// VMType, with azure, is how AKS builds the pool and names its nodes: scaleSet (default, a
	// Uniform scale set), virtualMachines (a Virtual Machines node pool: standalone VMs) or
	// availabilitySet (legacy: AKS no longer creates them).
	VMType string `yaml:"vmType"`
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
	// PDB gives each of the workload's ReplicaSets a PodDisruptionBudget (maintenance scenarios).
	PDB *PDB `yaml:"pdb"`
}

// Service is a LoadBalancer Service with externalTrafficPolicy Local selecting a workload.
type Service struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	Workload  string `yaml:"workload"`
	// BackendPools are the pools behind the load balancer, written as pool-scheduler's
	// provider-neutral annotation pool-scheduler.io/load-balancer-pools.
	BackendPools []string `yaml:"backendPools"`
	// Annotations are added to the Service, e.g. service.beta.kubernetes.io/azure-load-balancer-mode.
	Annotations map[string]string `yaml:"annotations"`
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
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty: a scenario needs at least a name and pools (see docs/scenarios.md)", source)
		}
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	s.setDefaults()
	if errs := s.validate(); len(errs) > 0 {
		var msgs []string
		last := lineCount(data)
		for _, e := range errs {
			// An empty document ("---") puts its null node on the line after the file's end.
			line := min(lineOf(&root, e.Field), last)
			msgs = append(msgs, fmt.Sprintf("%s:%d: %s", source, line, e.Error()))
		}
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	return s, nil
}

// Pool VM types with azure.
const (
	VMTypeAvailabilitySet = "availabilitySet"
	VMTypeScaleSet        = "scaleSet"
	VMTypeVirtualMachines = "virtualMachines"
)

func (s *Scenario) setDefaults() {
	if a := s.Azure; a != nil {
		orDefault(&a.ClusterHash, "27255451")
		orDefault(&a.Region, "westeurope")
		orDefault(&a.LoadBalancerSKU, "Standard")
		for i := range s.Pools {
			orDefault(&s.Pools[i].VMType, VMTypeScaleSet)
		}
	}
	for i := range s.Pools {
		p := &s.Pools[i]
		orDefault(&p.PoolLabelKey, "kubernetes.azure.com/agentpool")
		orDefault(&p.CPU, "4")
		orDefault(&p.Memory, "16Gi")
		if p.Pods == 0 {
			p.Pods = 110
		}
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		orDefault(&w.Namespace, "default")
		orDefault(&w.CPU, "100m")
		if w.ReplicaSets == 0 {
			w.ReplicaSets = 1
		}
	}
	for i := range s.Services {
		orDefault(&s.Services[i].Namespace, "default")
	}
	if s.Maintenance != nil {
		s.Maintenance.setDefaults()
	}
}

func orDefault(field *string, value string) {
	if *field == "" {
		*field = value
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
		errs = append(errs, configvalidation.ValidatePoolName(p.Name, fp.Child("name"))...)
		// The pool name also names its NodePoolLabelSet and, with a suffix, its nodes.
		if len(configvalidation.ValidatePoolName(p.Name, fp.Child("name"))) == 0 {
			for _, msg := range validation.IsDNS1123Label(p.Name) {
				errs = append(errs, field.Invalid(fp.Child("name"), p.Name, "pool names name nodes here: "+msg))
			}
		}
		if pools[p.Name] {
			errs = append(errs, field.Duplicate(fp.Child("name"), p.Name))
		}
		pools[p.Name] = true
		// Each count is bounded before they are added: their sum could overflow (nodes:
		// 9223372036854775807 with joiningNodes: 1).
		if p.Nodes < 0 || p.JoiningNodes < 0 || p.Nodes > 5000 || p.JoiningNodes > 5000 || p.Nodes+p.JoiningNodes == 0 || p.Nodes+p.JoiningNodes > 5000 {
			errs = append(errs, field.Invalid(fp.Child("nodes"), p.Nodes, "nodes + joiningNodes must be 1..5000"))
		}
		if p.FaultDomains < 0 {
			errs = append(errs, field.Invalid(fp.Child("faultDomains"), p.FaultDomains, "must not be negative"))
		}
		if p.UpdateDomains < 0 {
			errs = append(errs, field.Invalid(fp.Child("updateDomains"), p.UpdateDomains, "must not be negative"))
		}
		if p.Zones < 0 || p.Zones > 10 {
			errs = append(errs, field.Invalid(fp.Child("zones"), p.Zones, "must be 0..10"))
		}
		if p.Zones > 0 && p.FaultDomains > 0 {
			errs = append(errs, field.Invalid(fp.Child("faultDomains"), p.FaultDomains, "a zonal pool's zone label holds its zone, not a fault domain: set zones or faultDomains"))
		}
		switch {
		case s.Azure == nil && p.VMType != "":
			errs = append(errs, field.Forbidden(fp.Child("vmType"), "needs the scenario's azure settings"))
		case s.Azure != nil && p.VMType != VMTypeAvailabilitySet && p.VMType != VMTypeScaleSet && p.VMType != VMTypeVirtualMachines:
			errs = append(errs, field.NotSupported(fp.Child("vmType"), p.VMType, []string{VMTypeScaleSet, VMTypeVirtualMachines, VMTypeAvailabilitySet}))
		case p.VMType == VMTypeVirtualMachines && p.FaultDomains > 1:
			errs = append(errs, field.Invalid(fp.Child("faultDomains"), p.FaultDomains, "a virtualMachines pool's standalone VMs all report fault domain 0"))
		case p.VMType == VMTypeVirtualMachines && p.UpdateDomains > 1:
			errs = append(errs, field.Invalid(fp.Child("updateDomains"), p.UpdateDomains, "a virtualMachines pool's standalone VMs all report update domain 0"))
		}
		if p.Pods < 0 {
			errs = append(errs, field.Invalid(fp.Child("pods"), p.Pods, "must not be negative"))
		}
		if p.JoinAfter.Duration < 0 {
			errs = append(errs, field.Invalid(fp.Child("joinAfter"), p.JoinAfter.String(), "must not be negative"))
		}
		if p.LabelDelay.Duration < 0 {
			errs = append(errs, field.Invalid(fp.Child("labelDelay"), p.LabelDelay.String(), "must not be negative"))
		}
		for _, msg := range validation.IsQualifiedName(p.PoolLabelKey) {
			errs = append(errs, field.Invalid(fp.Child("poolLabelKey"), p.PoolLabelKey, msg))
		}
		errs = append(errs, validateLabels(p.Labels, fp.Child("labels"))...)
		errs = append(errs, validateLabels(p.LabelSet, fp.Child("labelSet"))...)
		for j, t := range p.Taints {
			tp := fp.Child("taints").Index(j)
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
			}
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
			switch v1.TaintEffect(t.Effect) {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				errs = append(errs, field.NotSupported(fp.Child("taints").Index(j).Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
			}
		}
		errs = append(errs, validateQuantity(p.CPU, fp.Child("cpu"))...)
		errs = append(errs, validateQuantity(p.Memory, fp.Child("memory"))...)
	}
	workloads := map[string]bool{}
	workloadsByNS := map[string]bool{}
	for i, w := range s.Workloads {
		fp := field.NewPath("workloads").Index(i)
		for _, msg := range validation.IsDNS1123Label(w.Name) {
			errs = append(errs, field.Invalid(fp.Child("name"), w.Name, msg))
		}
		// Its ReplicaSets carry the label set=<name>-NN, a label value of at most 63 characters.
		if len(w.Name) > maxWorkloadName {
			errs = append(errs, field.TooLong(fp.Child("name"), w.Name, maxWorkloadName))
		}
		if workloadsByNS[w.Namespace+"/"+w.Name] {
			errs = append(errs, field.Duplicate(fp.Child("name"), w.Name))
		}
		workloadsByNS[w.Namespace+"/"+w.Name] = true
		errs = append(errs, validateNamespace(w.Namespace, fp.Child("namespace"))...)
		if w.PriorityClassName != "" {
			for _, msg := range validation.IsDNS1123Subdomain(w.PriorityClassName) {
				errs = append(errs, field.Invalid(fp.Child("priorityClassName"), w.PriorityClassName, msg))
			}
		}
		if w.StartAfter.Duration < 0 {
			errs = append(errs, field.Invalid(fp.Child("startAfter"), w.StartAfter.String(), "must not be negative"))
		}
		workloads[w.Name] = true
		if w.Replicas < 1 || w.Replicas > 1000 {
			errs = append(errs, field.Invalid(fp.Child("replicas"), w.Replicas, "must be 1..1000"))
		}
		if w.ReplicaSets < 1 || w.ReplicaSets > 2000 {
			errs = append(errs, field.Invalid(fp.Child("replicaSets"), w.ReplicaSets, "must be 1..2000"))
		}
		errs = append(errs, validateQuantity(w.CPU, fp.Child("cpu"))...)
		errs = append(errs, validateLabels(w.AvoidLabels, fp.Child("avoidLabels"))...)
		errs = append(errs, validateLabels(w.RequireLabels, fp.Child("requireLabels"))...)
	}
	services := map[string]bool{}
	for i, svc := range s.Services {
		fp := field.NewPath("services").Index(i)
		for _, msg := range validation.IsDNS1035Label(svc.Name) {
			errs = append(errs, field.Invalid(fp.Child("name"), svc.Name, msg))
		}
		if services[svc.Namespace+"/"+svc.Name] {
			errs = append(errs, field.Duplicate(fp.Child("name"), svc.Name))
		}
		services[svc.Namespace+"/"+svc.Name] = true
		errs = append(errs, validateNamespace(svc.Namespace, fp.Child("namespace"))...)
		if !workloads[svc.Workload] {
			errs = append(errs, field.NotFound(fp.Child("workload"), svc.Workload))
		}
		for j, p := range svc.BackendPools {
			if !pools[p] {
				errs = append(errs, field.NotFound(fp.Child("backendPools").Index(j), p))
			}
		}
		keys := make([]string, 0, len(svc.Annotations))
		for k := range svc.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(fp.Child("annotations").Key(k), k, msg))
			}
		}
	}
	errs = append(errs, s.validateMaintenance()...)
	if a := s.Azure; a != nil {
		fp := field.NewPath("azure")
		if len(a.ClusterHash) != 8 || strings.Trim(a.ClusterHash, "0123456789") != "" {
			errs = append(errs, field.Invalid(fp.Child("clusterHash"), a.ClusterHash, "8 digits, as in AKS node names"))
		}
		for _, msg := range validation.IsDNS1123Label(a.Region) {
			errs = append(errs, field.Invalid(fp.Child("region"), a.Region, msg))
		}
		if a.LoadBalancerSKU != "Standard" && a.LoadBalancerSKU != "Basic" {
			errs = append(errs, field.NotSupported(fp.Child("loadBalancerSku"), a.LoadBalancerSKU, []string{"Basic", "Standard"}))
		}
		if a.PrimaryPool != "" && !pools[a.PrimaryPool] {
			errs = append(errs, field.NotFound(fp.Child("primaryPool"), a.PrimaryPool))
		}
		for i, p := range s.Pools {
			// aks-<pool>-<hash>-vmss<6 characters>: a node name is a DNS subdomain whose labels are at most 63.
			if len(p.Name) > 63-len("aks--12345678-vmss000000") {
				errs = append(errs, field.TooLong(field.NewPath("pools").Index(i).Child("name"), p.Name, 63-len("aks--12345678-vmss000000")))
			}
		}
	}
	return errs
}

// maxWorkloadName leaves room for the "-NN" suffix of the set label (a label value, 63 at most).
const maxWorkloadName = 60

// validateLabels checks labels in key order, so that errors come out in the same order every time.
func validateLabels(labels map[string]string, fp *field.Path) field.ErrorList {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		for _, msg := range pool.ValidateLabel(k, labels[k]) {
			errs = append(errs, field.Invalid(fp.Key(k), labels[k], msg))
		}
	}
	return errs
}

// validateQuantity checks a resource quantity: it must parse and not be negative.
func validateQuantity(q string, fp *field.Path) field.ErrorList {
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return field.ErrorList{field.Invalid(fp, q, err.Error())}
	}
	if v.Sign() < 0 {
		return field.ErrorList{field.Invalid(fp, q, "must not be negative")}
	}
	return nil
}

func validateNamespace(ns string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(fp, ns, msg))
	}
	return errs
}

// lineCount is the number of lines as YAML counts them: CR LF, CR, LF, NEL, LS and PS all end a
// line ("\r!" has its node on line 2).
func lineCount(data []byte) int {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := 1
	for _, r := range text {
		switch r {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			lines++
		}
	}
	return lines
}

// lineOf finds the line of a field path such as pools[1].labelSet[example.com/x] in the YAML
// tree: the deepest node that exists on the path. The path is matched against the tree's own
// keys rather than split on '.', because map keys (label keys) contain dots and brackets.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	rest := path
	for rest != "" {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		next, used := step(n, strings.TrimPrefix(rest, "."))
		if next == nil {
			break
		}
		rest = strings.TrimPrefix(rest, ".")[used:]
		n, line = next, next.Line
	}
	return max(line, 1)
}

// step follows the first segment of path (a field name, "[index]" or "[map key]") from n and
// returns the node it leads to and the length of the segment; a map key leads to the key itself.
func step(n *yaml.Node, path string) (*yaml.Node, int) {
	switch n.Kind {
	case yaml.MappingNode:
		var best *yaml.Node
		used := 0
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			switch {
			case strings.HasPrefix(path, "["+k+"]") && len(k)+2 > used:
				best, used = n.Content[i], len(k)+2
			case (path == k || strings.HasPrefix(path, k+".") || strings.HasPrefix(path, k+"[")) && len(k) > used:
				best, used = n.Content[i+1], len(k)
			}
		}
		return best, used
	case yaml.SequenceNode:
		if !strings.HasPrefix(path, "[") {
			return nil, 0
		}
		j := strings.IndexByte(path, ']')
		if j < 0 {
			return nil, 0
		}
		if i, err := strconv.Atoi(path[1:j]); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i], j + 1
		}
	}
	return nil, 0
}
