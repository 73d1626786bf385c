package v1

import (
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

// DefaultUnknownPoolPolicy is the default of NodePoolReadyArgs.UnknownPoolPolicy.
const DefaultUnknownPoolPolicy UnknownPoolPolicy = "Auto"

// SetDefaults_NodePoolReadyArgs sets the documented defaults.
func SetDefaults_NodePoolReadyArgs(obj *NodePoolReadyArgs) { //nolint:revive // name required by defaulter-gen
	if len(obj.PoolLabelKeys) == 0 {
		obj.PoolLabelKeys = append([]string(nil), pool.DefaultLabelKeys...)
	}
	if obj.UnknownPoolPolicy == "" {
		obj.UnknownPoolPolicy = DefaultUnknownPoolPolicy
	}
	if obj.IgnoreDaemonSetPods == nil {
		obj.IgnoreDaemonSetPods = ptr.To(true)
	}
}
