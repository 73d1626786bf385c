// Package plugins lists pool-scheduler's own scheduler plugins, for the binary, the simulator
// and the tests.
package plugins

import (
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	// Register the plugins' args types with kube-scheduler's config scheme.
	_ "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/domainspread"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolaffinity"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/systempoolguard"
)

// Registry holds pool-scheduler's own plugins.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		nodepoolready.Name:    nodepoolready.New,
		systempoolguard.Name:  systempoolguard.New,
		domainspread.Name:     domainspread.New,
		nodepoolaffinity.Name: nodepoolaffinity.New,
	}
}
