package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// LabelSetFindings reports where the gate's view of NodePoolLabelSets and the cluster disagree:
// sets in namespaces the gate does not read (unread, "namespace/name"), whose pools' nodes are
// then not held until labelled, and pools a labeler labels from a set the gate does not see
// (nodes carry a managed-labels annotation naming keys, no set of the pool is read), whose
// unlabelled nodes are held (pool.LabelSetNotVisible). namespaces are the gate's
// labelSetNamespaces (empty: every namespace); sets are the sets it reads.
func LabelSetFindings(id pool.Identity, namespaces, unread []string, sets *pool.LabelSets, nodes []*v1.Node) []Finding {
	where := "labelSetNamespaces: " + strings.Join(namespaces, ",")
	if len(namespaces) == 0 {
		where = "every namespace is read"
	}
	var out []Finding
	unreadByPool := map[string][]string{}
	for _, key := range unread {
		if key == UnreadNotChecked {
			out = append(out, Finding{Object: "NodePoolLabelSets outside " + strings.Join(namespaces, ","),
				Detail: "not checked: these credentials may not list NodePoolLabelSets in every namespace",
				Fix:    "run with credentials that may (get/list nodepoollabelsets cluster-wide) to find sets the scheduler does not read"})
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		unreadByPool[name] = append(unreadByPool[name], key)
		detail := fmt.Sprintf("in namespace %s, which the scheduler does not read (%s): nodes of pool %s are not held until these labels are applied", ns, where, name)
		if sets.Pool(name) != nil {
			detail = fmt.Sprintf("in namespace %s, which the scheduler does not read (%s): pool %s is judged by its sets in %s only",
				ns, where, name, strings.Join(sets.Pool(name).Sources, ", "))
		}
		out = append(out, Finding{Object: "NodePoolLabelSet " + key, Detail: detail, Fix: fixNamespaces(namespaces, ns)})
	}
	labelled := pool.LabelledPools(id, nodes, func(n *v1.Node) (map[string]string, map[string]string) { return n.Labels, n.Annotations })
	for _, p := range sets.WithLabelledPools(labelled).NotVisible() {
		f := Finding{Object: "pool " + p,
			Detail: fmt.Sprintf("nodes carry labels a labeler applied (%s) but no NodePoolLabelSet %s is read (%s): the pool's unlabelled nodes are held (%s)",
				pool.ManagedLabelsAnnotation, p, where, pool.LabelSetNotVisible.HeldReasonString()),
		}
		if found := unreadByPool[p]; len(found) > 0 {
			ns, _, _ := strings.Cut(found[0], "/")
			f.Fix = fmt.Sprintf("its set is %s: %s", strings.Join(found, ", "), fixNamespaces(namespaces, ns))
		} else if slices.Contains(unread, UnreadNotChecked) {
			f.Fix = "its set may be in a namespace these credentials cannot list: find it and add its namespace to labelSetNamespaces (docs/gate.md)"
		} else {
			f.Fix = fmt.Sprintf("no set %s exists in any namespace: if it was deleted while its labeler was down, remove the labels it left and the annotation (kubectl annotate nodes -l <pool label>=%s %s-)",
				p, p, pool.ManagedLabelsAnnotation)
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out
}

// UnreadNotChecked in LabelSetFindings' unread says the sets outside the namespaces could not be
// listed, so none is known not to exist.
const UnreadNotChecked = "*"

func fixNamespaces(namespaces []string, add string) string {
	want := append(append([]string(nil), namespaces...), add)
	sort.Strings(want)
	return fmt.Sprintf("read it: labelSetNamespaces [%s] (chart: --set 'labelSets.namespaces={%s}'; docs/gate.md)",
		strings.Join(want, ", "), strings.Join(want, ","))
}
