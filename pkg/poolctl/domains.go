package poolctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pool-scheduler/pool-scheduler/pkg/report"
)

// writeDomains prints each pool's distinct domains per spread dimension, and the dimensions
// that cannot spread a pool's replicas (one value for all its nodes).
func writeDomains(w io.Writer, pools []report.PoolDomains, degenerate []report.Finding) {
	if len(pools) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"POOL", "NODES"}
	for _, d := range pools[0].Dimensions {
		header = append(header, strings.ToUpper(d.Name))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, p := range pools {
		cells := []string{poolName(p.Pool), fmt.Sprint(p.Nodes)}
		for _, d := range p.Dimensions {
			cells = append(cells, domainCell(d, p.Nodes))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	if len(degenerate) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSPREAD DIMENSIONS THAT CANNOT SPREAD A POOL (not counted): %d\n", len(degenerate))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range degenerate {
		fmt.Fprintf(tw, "  %s\t%s\n  \tfix: %s\n", f.Object, f.Detail, f.Fix)
	}
	tw.Flush()
}

// domainCell is "3 (1,2,3)", "1 (0): not spread" or "6" (a value per node, e.g. hosts: not
// listed); a pool of one node cannot spread and is not marked.
func domainCell(d report.DimensionValues, nodes int) string {
	s := fmt.Sprint(d.Distinct)
	if len(d.Values) > 0 && len(d.Values) <= 5 && d.Distinct < nodes {
		s += " (" + strings.Join(d.Values, ",") + ")"
	}
	if !d.Spread() && nodes >= 2 {
		s += ": not spread"
	}
	if d.Missing > 0 {
		s += fmt.Sprintf(", %d unlabelled", d.Missing)
	}
	return s
}
