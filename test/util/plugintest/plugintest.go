// Package plugintest holds helpers for the plugins' unit tests. It stays light (the scheduler
// framework only), unlike test/util, which starts control planes: unit tests import this one.
package plugintest

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
)

// NodeInfo returns the scheduler's view of node, without pods.
func NodeInfo(node *v1.Node) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	return ni
}
