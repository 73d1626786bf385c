package labeler

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// Scheme holds the types the labeler reads and writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(labelsv1alpha1.AddToScheme(Scheme))
}

// GateFromSchedulerConfig returns, from a KubeSchedulerConfiguration document, NodePoolReady's
// rule (with SystemPoolGuard's system-node keys, which no set may name) and the namespaces whose
// NodePoolLabelSets it reads (its labelSetNamespaces; empty: every namespace) for the profile
// schedulerName: what the controller mode runs with when given --config.
func GateFromSchedulerConfig(data []byte, schedulerName string) (pool.Gate, []string, error) {
	args, err := profile.LoadArgs(data, schedulerName)
	if err != nil {
		return pool.Gate{}, nil, err
	}
	gate, ns := GateFromProfile(args)
	return gate, ns, nil
}

// GateFromProfile is GateFromSchedulerConfig for a profile's decoded args.
func GateFromProfile(args profile.Args) (pool.Gate, []string) {
	return pool.NewGateWithSystemArgs(args.NodePoolReady, args.SystemPoolGuard), slices.Clone(args.NodePoolReady.LabelSetNamespaces)
}
