package profile

import (
	"fmt"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// DefaultSchedulerName is the profile pool-scheduler's shipped configuration serves, and what
// every pool-labeler mode serves unless --scheduler-name names another.
const DefaultSchedulerName = "pool-scheduler"

// Profile is the scheduler's configuration as every pool-labeler mode reads it (--config and
// --scheduler-name): decoded once, strictly and defaulted as kube-scheduler does, the profile
// the mode serves, and that profile's plugin args, defaulted and validated.
type Profile struct {
	// Path is the file it was read from, for messages.
	Path string
	// Config is the whole configuration (leaderElection: the hand-off's Lease).
	Config *schedconfig.KubeSchedulerConfiguration
	// Profile is the profile named by --scheduler-name (empty: the first).
	Profile *schedconfig.KubeSchedulerProfile
	Args    Args
}

// Load decodes the configuration file path holds (data, read once by the caller) and picks the
// profile schedulerName ("": the first). Errors name --config and the file, and
// --scheduler-name when the file has no such profile.
func Load(path string, data []byte, schedulerName string) (*Profile, error) {
	cfg, err := LoadConfiguration(data)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	p, err := profileOf(cfg, schedulerName)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-name %q, --config %s: %w", schedulerName, path, err)
	}
	args, err := ArgsFromProfile(p)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return &Profile{Path: path, Config: cfg, Profile: p, Args: args}, nil
}

// Decode is Load for a document read from elsewhere (a ConfigMap): its errors name no flag.
func Decode(data []byte, schedulerName string) (*Profile, error) {
	cfg, err := LoadConfiguration(data)
	if err != nil {
		return nil, err
	}
	p, err := profileOf(cfg, schedulerName)
	if err != nil {
		return nil, err
	}
	args, err := ArgsFromProfile(p)
	if err != nil {
		return nil, err
	}
	return &Profile{Config: cfg, Profile: p, Args: args}, nil
}

// Name is the profile's schedulerName.
func (p *Profile) Name() string { return p.Profile.SchedulerName }
