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

// Defaults of SystemPoolGuardArgs.
var (
	DefaultSystemPools           = []string{"system"}
	DefaultSystemNamespaces      = []string{"kube-system"}
	DefaultSystemPriorityClasses = []string{"system-cluster-critical", "system-node-critical"}
	DefaultSystemTolerationKeys  = []string{"CriticalAddonsOnly"}
)

// SetDefaults_SystemPoolGuardArgs sets the documented defaults. Lists are defaulted only when
// absent (nil), so an explicit empty list switches a rule off.
func SetDefaults_SystemPoolGuardArgs(obj *SystemPoolGuardArgs) { //nolint:revive // name required by defaulter-gen
	if len(obj.PoolLabelKeys) == 0 {
		obj.PoolLabelKeys = append([]string(nil), pool.DefaultLabelKeys...)
	}
	if obj.SystemPools == nil {
		obj.SystemPools = append([]string(nil), DefaultSystemPools...)
	}
	if obj.SystemNamespaces == nil {
		obj.SystemNamespaces = append([]string(nil), DefaultSystemNamespaces...)
	}
	if obj.SystemPriorityClasses == nil {
		obj.SystemPriorityClasses = append([]string(nil), DefaultSystemPriorityClasses...)
	}
	if obj.SystemTolerationKeys == nil {
		obj.SystemTolerationKeys = append([]string(nil), DefaultSystemTolerationKeys...)
	}
	if obj.DaemonSetPodsAreSystemPods == nil {
		obj.DaemonSetPodsAreSystemPods = ptr.To(true)
	}
}

// DefaultSpreadDimensions are fault domain, update domain and host.
func DefaultSpreadDimensions() []SpreadDimension {
	return []SpreadDimension{
		{Name: "fault-domain", LabelKeys: []string{"topology.kubernetes.azure.com/fault-domain", "topology.pool-scheduler.io/fault-domain", "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"}},
		{Name: "update-domain", LabelKeys: []string{"topology.pool-scheduler.io/update-domain"}},
		{Name: "host", LabelKeys: []string{"kubernetes.io/hostname"}},
	}
}

// SetDefaults_DomainSpreadArgs sets the documented defaults.
func SetDefaults_DomainSpreadArgs(obj *DomainSpreadArgs) { //nolint:revive // name required by defaulter-gen
	if len(obj.Dimensions) == 0 {
		obj.Dimensions = DefaultSpreadDimensions()
	}
	if obj.Mode == "" {
		obj.Mode = "Soft"
	}
	if obj.MaxSkew == nil {
		obj.MaxSkew = ptr.To[int32](1)
	}
	if obj.SpreadPodsWithConstraints == nil {
		obj.SpreadPodsWithConstraints = ptr.To(false)
	}
	if obj.RejectNodesMissingKeys == nil {
		obj.RejectNodesMissingKeys = ptr.To(false)
	}
}
