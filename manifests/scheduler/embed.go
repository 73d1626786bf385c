// Package scheduler embeds the shipped KubeSchedulerConfiguration, so poolctl simulates
// exactly the profile users install.
package scheduler

import _ "embed"

// Config is manifests/scheduler/config.yaml.
//
//go:embed config.yaml
var Config []byte
