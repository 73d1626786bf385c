package report

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// maxListedValues bounds DimensionValues.Values: a host dimension has a value per node.
const maxListedValues = 10

// PoolDomains is what each spread dimension can do in one pool: how many distinct domains its
// nodes fall in. A dimension with one value in a pool of several nodes cannot spread the pool's
// replicas, whatever the scheduler does (a non-zonal scale set of fault-domain count 1 shows
// zone "0" on every node; standalone VMs all report update domain 0: docs/azure.md).
type PoolDomains struct {
	Pool       string            `json:"pool"`
	Nodes      int               `json:"nodes"`
	Dimensions []DimensionValues `json:"dimensions"`
}

// DimensionValues are one dimension's domains in a pool.
type DimensionValues struct {
	Name string `json:"name"`
	// Distinct counts the domains; Values lists them (sorted, at most maxListedValues).
	Distinct int      `json:"distinct"`
	Values   []string `json:"values,omitempty"`
	// Keys are the label keys that gave the pool's nodes their domain, in the dimension's order
	// (a pool whose nodes lack the zone label and fall back to a fault-domain key shows that key).
	Keys []string `json:"keys,omitempty"`
	// Missing counts nodes that carry none of the dimension's keys.
	Missing int `json:"missing,omitempty"`
}

// Spread reports whether the dimension can spread replicas in the pool: two or more domains.
func (d DimensionValues) Spread() bool { return d.Distinct >= 2 }

// PoolDomainsOf counts each dimension's distinct domains per pool (pools by name; "" for nodes
// without a pool label).
func PoolDomainsOf(identity pool.Identity, dims []Dimension, nodes []*v1.Node) []PoolDomains {
	type acc struct {
		nodes   int
		values  []map[string]bool
		keys    []map[string]bool
		missing []int
	}
	byPool := map[string]*acc{}
	for _, n := range nodes {
		name, _ := identity.PoolOf(n.Labels)
		a := byPool[name]
		if a == nil {
			a = &acc{values: make([]map[string]bool, len(dims)), keys: make([]map[string]bool, len(dims)), missing: make([]int, len(dims))}
			for d := range dims {
				a.values[d], a.keys[d] = map[string]bool{}, map[string]bool{}
			}
			byPool[name] = a
		}
		a.nodes++
		for d := range dims {
			v, ok := domainOf(dims, d, n.Labels)
			if !ok {
				a.missing[d]++
				continue
			}
			a.values[d][v] = true
			for _, k := range dims[d].Keys {
				if _, has := n.Labels[k]; has {
					a.keys[d][k] = true
					break
				}
			}
		}
	}
	out := make([]PoolDomains, 0, len(byPool))
	for name, a := range byPool {
		pd := PoolDomains{Pool: name, Nodes: a.nodes, Dimensions: make([]DimensionValues, len(dims))}
		for d, dim := range dims {
			values := make([]string, 0, len(a.values[d]))
			for v := range a.values[d] {
				values = append(values, v)
			}
			sort.Strings(values)
			dv := DimensionValues{Name: dim.Name, Distinct: len(values), Missing: a.missing[d]}
			if len(values) <= maxListedValues {
				dv.Values = values
			}
			for _, k := range dim.Keys {
				if a.keys[d][k] {
					dv.Keys = append(dv.Keys, k)
				}
			}
			pd.Dimensions[d] = dv
		}
		out = append(out, pd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

// DegenerateDomains lists, per pool of two or more nodes, each dimension that cannot spread
// there: one domain (or none) for the whole pool. They are facts about the cluster, not
// placement problems, so they are not counted as findings; saying "spread over update domains"
// about such a pool would promise what no scheduler can keep.
func DegenerateDomains(pools []PoolDomains) []Finding {
	var out []Finding
	for _, p := range pools {
		if p.Nodes < 2 {
			continue
		}
		for _, d := range p.Dimensions {
			if d.Spread() {
				continue
			}
			f := Finding{Object: "pool/" + poolLabel(p.Pool)}
			switch {
			case d.Distinct == 0:
				f.Detail = fmt.Sprintf("%s: none of the %d nodes of pool %s carries its labels: not spread", d.Name, p.Nodes, poolLabel(p.Pool))
			default:
				f.Detail = fmt.Sprintf("%s: 1 value in pool %s (%q on %d of %d nodes via %s): not spread", d.Name, poolLabel(p.Pool), d.Values[0],
					p.Nodes-d.Missing, p.Nodes, strings.Join(d.Keys, ", "))
			}
			f.Fix = degenerateFix(d)
			out = append(out, f)
		}
	}
	return out
}

func poolLabel(p string) string {
	if p == "" {
		return "(no pool label)"
	}
	return p
}

// degenerateFix says what gives the dimension a second value, for the dimensions and labels
// whose cause is known (docs/azure.md, "What each node kind reports").
func degenerateFix(d DimensionValues) string {
	zoneKey := false
	for _, k := range d.Keys {
		if k == v1.LabelTopologyZone || k == v1.LabelFailureDomainBetaZone {
			zoneKey = true
		}
	}
	switch {
	case d.Distinct == 0:
		return "label the nodes (for pool-labeler's domain keys: is its domain DaemonSet running there, and can it reach the instance metadata endpoint? docs/azure.md)"
	case zoneKey && isFaultDomainNumber(d.Values[0]):
		return "on Azure a non-zonal node's zone label is its platform fault domain, one value on a scale set of fault-domain count 1 (AKS's default) and on VM node pools; " +
			"create the pool in availability zones (--zones) to spread over zones (docs/azure.md)"
	case slices.Contains(d.Keys, configv1.UpdateDomainLabelKey):
		return "every node reports the same platform update domain (standalone VMs of VM node pools and node auto-provisioning report 0); " +
			"spreading over update domains needs a pool whose VMs Azure places in several (docs/azure.md)"
	}
	return "the dimension has one value in this pool: replicas kept to the pool cannot be spread over it"
}

// isFaultDomainNumber: cloud-provider-azure writes a non-zonal VM's fault domain (0, 1, 2) as its
// zone; a zonal VM's zone is <region>-<zone>.
func isFaultDomainNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}
