package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DefaultPoolLabelKeys is the ordered list of node label keys that name a node's pool on the
// platforms pool-scheduler supports. The first key with a non-empty value wins.
var DefaultPoolLabelKeys = []string{
	"nodepool.banzaicloud.io/name",
	"node.banzaicloud.io/nodepool",
	"kubernetes.azure.com/agentpool",
	"agentpool",
	"cloud.google.com/gke-nodepool",
	"eks.amazonaws.com/nodegroup",
	"karpenter.sh/nodepool",
	"doks.digitalocean.com/node-pool",
}

// DefaultUnknownPoolPolicy is the default of NodePoolReadyArgs.UnknownPoolPolicy.
const DefaultUnknownPoolPolicy UnknownPoolPolicy = "Auto"

// SetDefaults_NodePoolReadyArgs sets the documented defaults.
func SetDefaults_NodePoolReadyArgs(obj *NodePoolReadyArgs) { //nolint:revive // name required by defaulter-gen
	if len(obj.PoolLabelKeys) == 0 {
		obj.PoolLabelKeys = append([]string(nil), DefaultPoolLabelKeys...)
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

// AKSModeLabelKey is the label AKS puts on every node: "system" on system-mode pools, "user"
// otherwise. The default systemNodeSelector matches the system value, so a stock AKS cluster is
// protected without configuration.
const AKSModeLabelKey = "kubernetes.azure.com/mode"

// DefaultSystemNodeSelector selects AKS system-mode nodes.
func DefaultSystemNodeSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{AKSModeLabelKey: "system"}}
}

// SetDefaults_NodePoolAffinityArgs sets the documented defaults.
func SetDefaults_NodePoolAffinityArgs(obj *NodePoolAffinityArgs) { //nolint:revive // name required by defaulter-gen
	if len(obj.PoolLabelKeys) == 0 {
		obj.PoolLabelKeys = append([]string(nil), DefaultPoolLabelKeys...)
	}
}

// SetDefaults_SystemPoolGuardArgs sets the documented defaults. Lists are defaulted only when
// absent (nil), so an explicit empty list switches a rule off.
func SetDefaults_SystemPoolGuardArgs(obj *SystemPoolGuardArgs) { //nolint:revive // name required by defaulter-gen
	if len(obj.PoolLabelKeys) == 0 {
		obj.PoolLabelKeys = append([]string(nil), DefaultPoolLabelKeys...)
	}
	if obj.SystemPools == nil {
		obj.SystemPools = append([]string(nil), DefaultSystemPools...)
	}
	if obj.SystemNodeSelector == nil {
		obj.SystemNodeSelector = DefaultSystemNodeSelector()
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

// Label keys of the default spread dimensions.
const (
	// ZoneLabelKey is the zone. cloud-provider-azure writes "<region>-<zone>" on zonal VMs and
	// the platform fault domain number on VMs outside zones (availability sets, non-zonal scale
	// sets), so on Azure this one key is the zone or, where there is none, the fault domain.
	ZoneLabelKey = "topology.kubernetes.io/zone"
	// LegacyZoneLabelKey is the zone label's deprecated beta name.
	LegacyZoneLabelKey = "failure-domain.beta.kubernetes.io/zone"
	// FaultDomainLabelKey is written by pool-labeler's domain mode on VMs outside zones only:
	// the fallback for nodes without a zone label. Its values (0, 1, 2) repeat in every zone,
	// so it comes after the zone keys and never hides a zone.
	FaultDomainLabelKey = "topology.pool-scheduler.io/fault-domain"
	// AzureFaultDomainLabelKey is the platform fault domain as cloud-provider-azure would label
	// it (kubernetes-sigs/cloud-provider-azure#10222, PR #10907, open in November 2026): on
	// every VM, with no zone label on VMs outside zones. Read after the zone keys, so it never
	// hides a zone, and before pool-labeler's own fault-domain label, which it would replace.
	AzureFaultDomainLabelKey = "topology.kubernetes.azure.com/fault-domain"
	// UpdateDomainLabelKey is written by pool-labeler's domain mode; no provider labels it.
	UpdateDomainLabelKey = "topology.pool-scheduler.io/update-domain"
	// DomainLabelPrefix is the prefix of the domain labeler's keys (FaultDomainLabelKey,
	// UpdateDomainLabelKey). Each node's domain labeler owns them: a NodePoolLabelSet may not
	// name them (the CRD, pkg/pool and the labeler controller's admission policy refuse them),
	// or the controller and the domain labeler would rewrite each other's value forever.
	DomainLabelPrefix = "topology.pool-scheduler.io/"
)

// DefaultSpreadDimensions are the zone (or fault domain, where nodes are not zonal), the
// update domain and the host.
func DefaultSpreadDimensions() []SpreadDimension {
	return []SpreadDimension{
		{Name: "zone", LabelKeys: []string{ZoneLabelKey, LegacyZoneLabelKey, AzureFaultDomainLabelKey, FaultDomainLabelKey}},
		{Name: "update-domain", LabelKeys: []string{UpdateDomainLabelKey}},
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
	if obj.DeletionCostAtBind == nil {
		obj.DeletionCostAtBind = ptr.To(true)
	}
}
