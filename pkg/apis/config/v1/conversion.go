package v1

import (
	"slices"

	"k8s.io/apimachinery/pkg/conversion"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
)

// Convert_v1_NodePoolReadyArgs_To_config_NodePoolReadyArgs reads the deprecated single
// labelSetNamespace as one more entry of labelSetNamespaces (a one-element list when that is
// absent): a namespace the configuration names is never dropped, and validation judges it
// there (args.labelSetNamespaces[i]).
func Convert_v1_NodePoolReadyArgs_To_config_NodePoolReadyArgs(in *NodePoolReadyArgs, out *config.NodePoolReadyArgs, s conversion.Scope) error { //nolint:revive // name required by conversion-gen
	if err := autoConvert_v1_NodePoolReadyArgs_To_config_NodePoolReadyArgs(in, out, s); err != nil {
		return err
	}
	if in.LabelSetNamespace != "" && !slices.Contains(in.LabelSetNamespaces, in.LabelSetNamespace) {
		out.LabelSetNamespaces = append(slices.Clone(in.LabelSetNamespaces), in.LabelSetNamespace)
	}
	return nil
}

// Convert_config_NodePoolReadyArgs_To_v1_NodePoolReadyArgs writes labelSetNamespaces only.
func Convert_config_NodePoolReadyArgs_To_v1_NodePoolReadyArgs(in *config.NodePoolReadyArgs, out *NodePoolReadyArgs, s conversion.Scope) error { //nolint:revive // name required by conversion-gen
	return autoConvert_config_NodePoolReadyArgs_To_v1_NodePoolReadyArgs(in, out, s)
}
