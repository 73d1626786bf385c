package static

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestStatusPoliciesCompareEveryField: the labeler's policy lets it change one node condition
// of a node's status, and the scheduler's pod-writes policy lets it change only what
// kube-scheduler writes into a pod's status, each by comparing every other field, named one by
// one (CEL cannot compare an object minus some fields). A field the API gains (NodeStatus
// declaredFeatures in 1.36) is one either could forge unchecked, so every field of this line's
// Go type must be compared, in the kustomize and the chart copy of each policy.
func TestStatusPoliciesCompareEveryField(t *testing.T) {
	for _, c := range []struct {
		typ     reflect.Type
		written map[string]string // fields the writer may change (compared elsewhere or not at all), with why
		files   []string
	}{
		{reflect.TypeOf(v1.NodeStatus{}), map[string]string{"conditions": "compared by type, but for PoolLabelsApplied"},
			[]string{"manifests/labeler/controller/admission-policy.yaml", "manifests/charts/pool-scheduler/templates/labeler-controller.yaml"}},
		{reflect.TypeOf(v1.PodStatus{}), map[string]string{
			"conditions":                           "compared but for PodScheduled and DisruptionTarget",
			"phase":                                "compared on its own",
			"nominatedNodeName":                    "kube-scheduler nominates a node for a preemptor",
			"resourceClaimStatuses":                "the resourceclaim controller writes it; left open (a forged entry names a claim the kubelet refuses for the pod)",
			"extendedResourceClaimStatus":          "DynamicResources (DRA extended resources)",
			"nodeAllocatableResourceClaimStatuses": "DynamicResources (node-allocatable DRA claims)",
		}, []string{"manifests/scheduler/admission-policy.yaml", "manifests/charts/pool-scheduler/templates/scheduler-rbac.yaml"}},
	} {
		for _, file := range c.files {
			data, err := os.ReadFile(filepath.Join(repoRoot(t), file))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range jsonFields(c.typ) {
				if _, ok := c.written[f]; ok {
					continue
				}
				if want := "object.status.?" + f + " == oldObject.status.?" + f; !strings.Contains(string(data), want) {
					t.Errorf("%s does not compare %s.%s (%q): its writer could change it", file, c.typ.Name(), f, want)
				}
			}
		}
	}
}
