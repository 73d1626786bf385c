package config

// The plugins' names, as scheduler configurations write them. Each plugin's Name is its
// constant here, so tools that read a profile (pkg/profile) need not import plugins.
const (
	NodePoolReadyName   = "NodePoolReady"
	SystemPoolGuardName = "SystemPoolGuard"
	DomainSpreadName    = "DomainSpread"
	// NodePoolAffinityName narrows the nodes a pool-pinned pod is filtered on to its pools'.
	NodePoolAffinityName = "NodePoolAffinity"
)
