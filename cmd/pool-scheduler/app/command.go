// Package app assembles the pool-scheduler command: kube-scheduler with our plugins
// (pkg/plugins.Registry, which tests run in process) and, on the lines that bundle it,
// scheduler-plugins' (schedulerplugins_k8s134.go).
package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	kubescheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// DisableHTTP2Flag is kube-scheduler's flag (k8s.io/apiserver SecureServingOptions) that keeps
// HTTP/2 off the secure port; pool-scheduler defaults it to true.
const DisableHTTP2Flag = "disable-http2-serving"

// NewCommand returns the kube-scheduler command with every plugin registered.
func NewCommand() *cobra.Command {
	var opts []kubescheduler.Option
	// The profiles of --config, read before kube-scheduler builds them: NodePoolReady needs its
	// profile's SystemPoolGuard args (plugins.RegistryFor).
	var profiles []schedconfig.KubeSchedulerProfile
	for name, factory := range checkingVersion(plugins.RegistryFor(func() []schedconfig.KubeSchedulerProfile { return profiles })) {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	for name, factory := range schedulerPlugins {
		opts = append(opts, kubescheduler.WithPlugin(name, factory))
	}
	cmd := kubescheduler.NewSchedulerCommand(opts...)
	// HTTP/1.1 only on the secure port unless --disable-http2-serving=false is given, as on our
	// other servers (internal/tlsserving says why).
	if f := cmd.Flags().Lookup(DisableHTTP2Flag); f != nil {
		if err := f.Value.Set("true"); err != nil {
			panic(fmt.Sprintf("--%s: %v", DisableHTTP2Flag, err))
		}
		f.DefValue = "true"
	}
	cmd.Use = "pool-scheduler"
	cmd.Short = "pool-scheduler: kube-scheduler with node-pool plugins (NodePoolReady, SystemPoolGuard, DomainSpread)"
	cmd.Long = version.String() + "\n\n" + cmd.Short + ".\n\n" + cmd.Long
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// kube-scheduler's --version names only the Kubernetes release; ours comes first so an
		// image or a binary can be traced to its commit, then the release line (Kubernetes
		// release and minor, scheduler-plugins bundled or not). --version=raw stays upstream's.
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
			fmt.Fprintf(c.OutOrStdout(), "%s\n%s\n", version.String(), version.Line())
			return nil
		}
		version.RegisterMetric()
		profiles = configProfiles(c)
		return run(c, args)
	}
	return cmd
}

// configProfiles returns the profiles of the command's --config, decoded as kube-scheduler
// decodes them; none without --config or when it cannot be read (kube-scheduler then reports
// the error itself, or runs its defaults, where NodePoolReady gets SystemPoolGuard's defaults).
func configProfiles(c *cobra.Command) []schedconfig.KubeSchedulerProfile {
	f := c.Flags().Lookup("config")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	data, err := os.ReadFile(f.Value.String())
	if err == nil {
		var cfg *schedconfig.KubeSchedulerConfiguration
		if cfg, err = profile.LoadConfiguration(data); err == nil {
			return cfg.Profiles
		}
	}
	// Said, not silent: the labeler may be reading this file's keys while the gate reads defaults.
	klog.Background().Info("Warning: cannot read the profiles of --config; NodePoolReady ignores the default systemNodeSelector keys in label sets",
		"config", f.Value.String(), "err", err)
	return nil
}
