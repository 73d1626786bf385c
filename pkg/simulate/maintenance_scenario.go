package simulate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/aksemu"
)

// Maintenance kinds: the operations pkg/aksemu plays.
const (
	SurgeUpgrade  = aksemu.SurgeUpgrade
	BlueGreen     = aksemu.BlueGreen
	Consolidation = aksemu.Consolidation
)

var maintenanceKinds = []string{SurgeUpgrade, BlueGreen, Consolidation}

// What AKS does with a node whose drain outlasts drainTimeout (undrainableNodeBehavior).
const (
	UndrainableSchedule = "Schedule"
	UndrainableCordon   = "Cordon"
	// Reimage: what a reimage does to the Node object. AKS keeps the name; whether it keeps the
	// object is not established, and most evidence says it registers it again
	// (docs/maintenance.md), so that is the default.
	ReimageRegistersAgain = "registersAgain"
	ReimageKeepsNode      = "keepsNode"
)

// AKS defaults and limits (docs/maintenance.md has the sources).
var (
	defaultMaxSurge          = IntOrPercent{Value: 10, Percent: true}
	defaultBatchSize         = IntOrPercent{Value: 10, Percent: true}
	defaultBudget            = IntOrPercent{Value: 10, Percent: true}
	defaultBatchSoak         = 15 * time.Minute
	defaultFinalSoak         = 60 * time.Minute
	maxBatchSoak             = 1440 * time.Minute
	maxFinalSoak             = 10080 * time.Minute
	defaultDrainTimeout      = 30 * time.Minute
	minDrainTimeout          = 5 * time.Minute
	minBlueGreenDrainTimeout = time.Minute
	maxDrainTimeout          = 1440 * time.Minute
	maxNodeSoak              = 30 * time.Minute
	// maxPDBCount bounds a budget's count as replicas are bounded (a PDB field is an int32).
	maxPDBCount = 1000
)

// Maintenance is a platform operation played on one pool once every workload is Ready.
// Durations are AKS time; the run compresses them by TimeScale.
type Maintenance struct {
	Kind string `yaml:"kind"`
	Pool string `yaml:"pool"`
	// MaxSurge is the number of surge nodes: an integer or a percentage of the pool, rounded
	// up, capped at the nodes left to upgrade (default 10%).
	MaxSurge *IntOrPercent `yaml:"maxSurge"`
	// DrainTimeout bounds each node's drain (default 30m, 5m..1440m as AKS allows).
	DrainTimeout Duration `yaml:"drainTimeout"`
	// NodeSoak is the wait after a node's drain before its reimage (default 0, at most 30m).
	NodeSoak Duration `yaml:"nodeSoak"`
	// Undrainable is what happens to a node still undrained at DrainTimeout: Schedule (default)
	// uncordons it and ends the upgrade failed; Cordon quarantines it and goes on.
	Undrainable string `yaml:"undrainable"`
	// Reimage (surgeUpgrade): registersAgain (default) deletes the reimaged node's Node object
	// and registers a new one under the same name (new UID and creation time); keepsNode
	// updates the same object.
	Reimage string `yaml:"reimage"`
	// DrainBatchSize (blueGreen) is the blue nodes drained at once: an integer or a percentage
	// of the blue nodes, rounded up (default 10%); BatchSoak the wait after each batch (default
	// 15m, at most 24h) and FinalSoak the wait before blue is deleted (default 60m, at most 7d).
	DrainBatchSize *IntOrPercent `yaml:"drainBatchSize"`
	BatchSoak      *Duration     `yaml:"batchSoak"`
	FinalSoak      *Duration     `yaml:"finalSoak"`
	// Budget (consolidation) is the nodes disrupted at once: an integer or a percentage of the
	// pool, rounded up (default 10%, Karpenter's default budget).
	Budget *IntOrPercent `yaml:"budget"`
	// BudgetFloor runs the budget floor (pool-labeler spread --budget-floor, package
	// spreadkeeper/floor) with every workload's namespace opted in: each workload without a pdb,
	// of 3 or more replicas, gets the floor's budget before the maintenance starts. Each
	// ReplicaSet is then controlled by a Deployment object of the same name and replicas, which
	// no controller runs (the floor keeps budgets for Deployments and StatefulSets).
	BudgetFloor bool `yaml:"budgetFloor"`
	// PodReadyAfter is how long the kubelet stand-in takes to make a bound pod Ready (default 30s).
	PodReadyAfter Duration `yaml:"podReadyAfter"`
	// ReimageTime is how long a reimaged node stays NotReady (default 5m); ProvisionTime how
	// long a surge node takes to join (default 3m).
	ReimageTime   Duration `yaml:"reimageTime"`
	ProvisionTime Duration `yaml:"provisionTime"`
	// Seed fixes the random choices (batch order, surge zones): the same in every mode.
	Seed int64 `yaml:"seed"`
	// TimeScale is simulated time per real time (default 60: a simulated minute per second).
	TimeScale float64 `yaml:"timeScale"`
	// FromNodeImage/ToNodeImage are kubernetes.azure.com/node-image-version before and after;
	// FromKubelet/ToKubelet the nodes' status.nodeInfo.kubeletVersion.
	FromNodeImage string `yaml:"fromNodeImage"`
	ToNodeImage   string `yaml:"toNodeImage"`
	FromKubelet   string `yaml:"fromKubelet"`
	ToKubelet     string `yaml:"toKubelet"`
}

// PDB is a workload's PodDisruptionBudget: exactly one of the two.
type PDB struct {
	MaxUnavailable *IntOrPercent `yaml:"maxUnavailable"`
	MinAvailable   *IntOrPercent `yaml:"minAvailable"`
}

// IntOrPercent is a count written as an integer (3) or a percentage ("10%").
type IntOrPercent struct {
	Value   int
	Percent bool
}

// UnmarshalYAML parses 3 or "10%".
func (v *IntOrPercent) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	text := strings.TrimSuffix(s, "%")
	i, err := strconv.Atoi(text)
	if err != nil || i < 0 {
		return fmt.Errorf("line %d: %q is neither a non-negative integer nor a percentage like 10%%", n.Line, s)
	}
	*v = IntOrPercent{Value: i, Percent: text != s}
	return nil
}

// MarshalYAML writes 3 or "10%".
func (v IntOrPercent) MarshalYAML() (any, error) {
	if v.Percent {
		return v.String(), nil
	}
	return v.Value, nil
}

func (v IntOrPercent) String() string {
	if v.Percent {
		return fmt.Sprintf("%d%%", v.Value)
	}
	return fmt.Sprint(v.Value)
}

// Of is the count out of total: a percentage rounded up, as AKS rounds maxSurge.
func (v IntOrPercent) Of(total int) int {
	if !v.Percent {
		return v.Value
	}
	return int(math.Ceil(float64(total) * float64(v.Value) / 100))
}

// IntOrString is the value as a PodDisruptionBudget field.
func (v IntOrPercent) IntOrString() intstr.IntOrString {
	if v.Percent {
		return intstr.FromString(v.String())
	}
	return intstr.FromInt32(int32(v.Value))
}

// Sim converts an AKS duration into the run's real time.
func (m *Maintenance) Sim(d time.Duration) time.Duration {
	return time.Duration(float64(d) / m.TimeScale)
}

// setDefaults fills in AKS's defaults for the kind's own settings only: a setting of another
// kind stays unset, so validate can refuse it.
func (m *Maintenance) setDefaults() {
	orDefault(&m.Kind, SurgeUpgrade)
	switch m.Kind {
	case SurgeUpgrade:
		if m.MaxSurge == nil {
			m.MaxSurge = ptr.To(defaultMaxSurge)
		}
		orDefault(&m.Undrainable, UndrainableSchedule)
		orDefault(&m.Reimage, ReimageRegistersAgain)
	case BlueGreen:
		if m.DrainBatchSize == nil {
			m.DrainBatchSize = ptr.To(defaultBatchSize)
		}
		if m.BatchSoak == nil {
			m.BatchSoak = &Duration{defaultBatchSoak}
		}
		if m.FinalSoak == nil {
			m.FinalSoak = &Duration{defaultFinalSoak}
		}
	case Consolidation:
		if m.Budget == nil {
			m.Budget = ptr.To(defaultBudget)
		}
	}
	if m.DrainTimeout.Duration == 0 {
		m.DrainTimeout.Duration = defaultDrainTimeout
	}
	if m.PodReadyAfter.Duration == 0 {
		m.PodReadyAfter.Duration = 30 * time.Second
	}
	if m.ReimageTime.Duration == 0 {
		m.ReimageTime.Duration = 5 * time.Minute
	}
	if m.ProvisionTime.Duration == 0 {
		m.ProvisionTime.Duration = 3 * time.Minute
	}
	if m.Seed == 0 {
		m.Seed = 1
	}
	if m.TimeScale == 0 {
		m.TimeScale = 60
	}
	orDefault(&m.FromNodeImage, "AKSUbuntu-2204gen2containerd-202410.27.0")
	orDefault(&m.ToNodeImage, "AKSUbuntu-2204gen2containerd-202411.12.0")
	orDefault(&m.FromKubelet, "v1.33.5")
	orDefault(&m.ToKubelet, "v1.34.10")
}

func (s *Scenario) validateMaintenance() field.ErrorList {
	m := s.Maintenance
	if m == nil {
		for i, w := range s.Workloads {
			if w.PDB != nil {
				return field.ErrorList{field.Forbidden(field.NewPath("workloads").Index(i).Child("pdb"), "PodDisruptionBudgets matter only in a maintenance scenario")}
			}
		}
		return nil
	}
	fp := field.NewPath("maintenance")
	var errs field.ErrorList
	if !slices.Contains(maintenanceKinds, m.Kind) {
		errs = append(errs, field.NotSupported(fp.Child("kind"), m.Kind, maintenanceKinds))
	}
	// Each kind's own settings; another kind's is refused rather than ignored.
	own := map[string]bool{
		"maxSurge": m.Kind == SurgeUpgrade, "undrainable": m.Kind == SurgeUpgrade, "reimage": m.Kind == SurgeUpgrade,
		"drainBatchSize": m.Kind == BlueGreen, "batchSoak": m.Kind == BlueGreen, "finalSoak": m.Kind == BlueGreen,
		"budget": m.Kind == Consolidation,
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"maxSurge", m.MaxSurge != nil}, {"undrainable", m.Undrainable != ""}, {"reimage", m.Reimage != ""}, {"drainBatchSize", m.DrainBatchSize != nil},
		{"batchSoak", m.BatchSoak != nil}, {"finalSoak", m.FinalSoak != nil}, {"budget", m.Budget != nil}} {
		if f.set && !own[f.name] {
			errs = append(errs, field.Forbidden(fp.Child(f.name), fmt.Sprintf("not a setting of kind %s", m.Kind)))
		}
	}
	for _, c := range []struct {
		name string
		v    *IntOrPercent
	}{{"maxSurge", m.MaxSurge}, {"drainBatchSize", m.DrainBatchSize}, {"budget", m.Budget}} {
		if c.v != nil && own[c.name] && (c.v.Value < 1 || (c.v.Percent && c.v.Value > 100)) {
			errs = append(errs, field.Invalid(fp.Child(c.name), c.v.String(), "at least 1 node, or 1% to 100% of the pool"))
		}
	}
	if d := m.BatchSoak; d != nil && own["batchSoak"] && (d.Duration < 0 || d.Duration > maxBatchSoak) {
		errs = append(errs, field.Invalid(fp.Child("batchSoak"), d.String(), fmt.Sprintf("must be 0..%v, as AKS allows", maxBatchSoak)))
	}
	if d := m.FinalSoak; d != nil && own["finalSoak"] && (d.Duration < 0 || d.Duration > maxFinalSoak) {
		errs = append(errs, field.Invalid(fp.Child("finalSoak"), d.String(), fmt.Sprintf("must be 0..%v, as AKS allows", maxFinalSoak)))
	}
	var pool *Pool
	for i := range s.Pools {
		if s.Pools[i].Name == m.Pool {
			pool = &s.Pools[i]
		}
	}
	switch {
	case pool == nil:
		errs = append(errs, field.NotFound(fp.Child("pool"), m.Pool))
	case pool.JoiningNodes > 0:
		errs = append(errs, field.Forbidden(fp.Child("pool"), fmt.Sprintf("pool %s has joiningNodes: the maintenance starts on a settled pool", m.Pool)))
	}
	// The blue-green settings allow a shorter drain timeout than the rolling ones.
	lowest := minDrainTimeout
	if m.Kind == BlueGreen {
		lowest = minBlueGreenDrainTimeout
	}
	if d := m.DrainTimeout.Duration; d < lowest || d > maxDrainTimeout {
		errs = append(errs, field.Invalid(fp.Child("drainTimeout"), d.String(), fmt.Sprintf("must be %v..%v, as AKS allows", lowest, maxDrainTimeout)))
	}
	if d := m.NodeSoak.Duration; d < 0 || d > maxNodeSoak {
		errs = append(errs, field.Invalid(fp.Child("nodeSoak"), d.String(), fmt.Sprintf("must be 0..%v, as AKS allows", maxNodeSoak)))
	}
	if own["undrainable"] && m.Undrainable != UndrainableSchedule && m.Undrainable != UndrainableCordon {
		errs = append(errs, field.NotSupported(fp.Child("undrainable"), m.Undrainable, []string{UndrainableSchedule, UndrainableCordon}))
	}
	if own["reimage"] && m.Reimage != ReimageRegistersAgain && m.Reimage != ReimageKeepsNode {
		errs = append(errs, field.NotSupported(fp.Child("reimage"), m.Reimage, []string{ReimageRegistersAgain, ReimageKeepsNode}))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"podReadyAfter", m.PodReadyAfter.Duration}, {"reimageTime", m.ReimageTime.Duration}, {"provisionTime", m.ProvisionTime.Duration}} {
		if d.d < 0 {
			errs = append(errs, field.Invalid(fp.Child(d.name), d.d.String(), "must not be negative"))
		}
	}
	if !(m.TimeScale > 0 && m.TimeScale <= 3600) { // NaN too
		errs = append(errs, field.Invalid(fp.Child("timeScale"), m.TimeScale, "must be above 0 and at most 3600 (simulated seconds per real second)"))
	}
	if m.FromNodeImage == m.ToNodeImage && m.FromKubelet == m.ToKubelet {
		errs = append(errs, field.Invalid(fp.Child("toNodeImage"), m.ToNodeImage, "an upgrade changes the node image or the kubelet version"))
	}
	for i, w := range s.Workloads {
		wp := field.NewPath("workloads").Index(i)
		if w.Rollout {
			errs = append(errs, field.Forbidden(wp.Child("rollout"), "a maintenance scenario's workloads are ReplicaSets the ReplicaSet controller keeps: no rollout"))
		}
		if w.PDB == nil {
			continue
		}
		switch {
		case (w.PDB.MaxUnavailable == nil) == (w.PDB.MinAvailable == nil):
			errs = append(errs, field.Invalid(wp.Child("pdb"), "", "set exactly one of maxUnavailable and minAvailable"))
		case w.PDB.MaxUnavailable != nil && !w.PDB.MaxUnavailable.Percent && w.PDB.MaxUnavailable.Value > maxPDBCount:
			errs = append(errs, field.Invalid(wp.Child("pdb", "maxUnavailable"), w.PDB.MaxUnavailable.String(), fmt.Sprintf("at most %d", maxPDBCount)))
		case w.PDB.MinAvailable != nil && !w.PDB.MinAvailable.Percent && w.PDB.MinAvailable.Value > maxPDBCount:
			errs = append(errs, field.Invalid(wp.Child("pdb", "minAvailable"), w.PDB.MinAvailable.String(), fmt.Sprintf("at most %d", maxPDBCount)))
		case w.PDB.MaxUnavailable != nil && w.PDB.MaxUnavailable.Percent && w.PDB.MaxUnavailable.Value > 100:
			errs = append(errs, field.Invalid(wp.Child("pdb", "maxUnavailable"), w.PDB.MaxUnavailable.String(), "at most 100%"))
		case w.PDB.MinAvailable != nil && w.PDB.MinAvailable.Percent && w.PDB.MinAvailable.Value > 100:
			errs = append(errs, field.Invalid(wp.Child("pdb", "minAvailable"), w.PDB.MinAvailable.String(), "at most 100%"))
		}
	}
	return errs
}
