// Package profile is pool-scheduler's scheduler profile as the tools around the scheduler see
// it: a KubeSchedulerConfiguration read from a file or from the scheduler's ConfigMap, decoded
// strictly as kube-scheduler decodes it, and the args of the three of our four plugins that
// decide where a pod may go (NodePoolReady, SystemPoolGuard, DomainSpread; NodePoolAffinity only
// narrows the search) defaulted and validated by the same scheme and rules the plugins run with.
//
// The labeler, the admission webhook, poolctl, the placement report and the simulator build
// what they enforce or measure from these args, so they judge by the scheduler's rules and
// never by defaults of their own. The package sits below all of them and above pkg/apis and
// pkg/pool only.
package profile
