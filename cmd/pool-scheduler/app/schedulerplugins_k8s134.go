//go:build !k8s136

package app

import (
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
)

// schedulerPlugins are the scheduler-plugins project's plugins, available to any profile. Only
// the 1.34 line has them: scheduler-plugins v0.34.7 is built against the 1.34 framework API
// (pkg/version.SchedulerPlugins).
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
