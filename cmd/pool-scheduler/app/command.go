// Package app assembles the pool-scheduler command: kube-scheduler with our plugins
// (pkg/plugins.Registry, which tests run in process) and scheduler-plugins' registered.
package app

import (
	"fmt"

	"github.com/spf13/cobra"
	k8sversion "k8s.io/component-base/version"
	kubescheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/networkaware/networkoverhead"
	"sigs.k8s.io/scheduler-plugins/pkg/networkaware/topologicalsort"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesources"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
	"sigs.k8s.io/scheduler-plugins/pkg/podstate"
	"sigs.k8s.io/scheduler-plugins/pkg/preemptiontoleration"
	"sigs.k8s.io/scheduler-plugins/pkg/qos"
	"sigs.k8s.io/scheduler-plugins/pkg/sysched"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/loadvariationriskbalancing"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/lowriskovercommitment"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/peaks"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/targetloadpacking"

	// Register scheduler-plugins' args types with kube-scheduler's config scheme.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// schedulerPlugins are the scheduler-plugins project's plugins, available to any profile.
var schedulerPlugins = frameworkruntime.Registry{
	capacityscheduling.Name:         capacityscheduling.New,
	coscheduling.Name:               coscheduling.New,
	loadvariationriskbalancing.Name: loadvariationriskbalancing.New,
	networkoverhead.Name:            networkoverhead.New,
	topologicalsort.Name:            topologicalsort.New,
	noderesources.AllocatableName:   noderesources.NewAllocatable,
	noderesourcetopology.Name:       noderesourcetopology.New,
	preemptiontoleration.Name:       preemptiontoleration.New,
	targetloadpacking.Name:          targetloadpacking.New,
	lowriskovercommitment.Name:      lowriskovercommitment.New,
	sysched.Name:                    sysched.New,
	peaks.Name:                      peaks.New,
	podstate.Name:                   podstate.New,
	qos.Name:                        qos.New,
}

// NewCommand returns the kube-scheduler command with every plugin registered.
func NewCommand() *cobra.Command {
	var opts []kubescheduler.Option
	for name, factory := range plugins.Registry() {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	for name, factory := range schedulerPlugins {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	cmd := kubescheduler.NewSchedulerCommand(opts...)
	cmd.Use = "pool-scheduler"
	cmd.Short = "pool-scheduler: kube-scheduler with node-pool plugins (NodePoolReady, SystemPoolGuard, DomainSpread)"
	cmd.Long = version.String() + "\n\n" + cmd.Short + ".\n\n" + cmd.Long
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// kube-scheduler's --version names only the Kubernetes release; ours comes first so an
		// image or a binary can be traced to its commit. --version=raw stays upstream's.
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			fmt.Fprintf(c.OutOrStdout(), "%s\nKubernetes %s\n", version.String(), k8sversion.Get())
			return nil
		}
		version.RegisterMetric()
		return run(c, args)
	}
	return cmd
}
