package app

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	scheduler "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

func TestValidateLeaderElection(t *testing.T) {
	tests := []struct {
		name                string
		lease, renew, retry time.Duration
		wantErrContaining   string
	}{
		{name: "defaults", lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second},
		{name: "fast takeover", lease: 4 * time.Second, renew: 3 * time.Second, retry: 500 * time.Millisecond},
		{name: "zero retry", lease: 15 * time.Second, renew: 10 * time.Second, wantErrContaining: "--leader-elect-retry-period must be positive"},
		{name: "renew within retry jitter", lease: 15 * time.Second, renew: 2 * time.Second, retry: 2 * time.Second, wantErrContaining: "--leader-elect-renew-deadline"},
		{name: "lease not longer than renew", lease: 10 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second, wantErrContaining: "--leader-elect-lease-duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateLeaderElection(tt.lease, tt.renew, tt.retry)
			switch {
			case tt.wantErrContaining == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErrContaining != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrContaining)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErrContaining)
			}
		})
	}
}

// TestConfigFlag: the scheduler's configuration is --config in every mode that reads it; the
// controller's earlier name, --scheduler-config, still sets it (deprecated), and a file that
// cannot be read is refused, naming the flag, before anything is connected to.
func TestConfigFlag(t *testing.T) {
	dir := t.TempDir()
	missing, shipped, notConfig := filepath.Join(dir, "missing.yaml"), filepath.Join(dir, "config.yaml"), filepath.Join(dir, "configmap.yaml")
	if err := os.WriteFile(shipped, scheduler.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notConfig, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "controller", args: []string{"controller", "--config=" + missing}, wantErr: "--config: open " + missing},
		{name: "controller, earlier name", args: []string{"controller", "--scheduler-config=" + missing}, wantErr: "--config: open " + missing},
		{name: "webhook", args: []string{"webhook", "--config=" + missing}, wantErr: "--config: open " + missing},
		{name: "handoff", args: []string{"handoff", "--config=" + missing}, wantErr: "--config: open " + missing},
		{name: "spread", args: []string{"spread", "--config=" + missing}, wantErr: "--config: open " + missing},
		{name: "handoff requires it", args: []string{"handoff"}, wantErr: "--config: required"},
		{name: "spread requires it", args: []string{"spread"}, wantErr: "--config: required"},
		{name: "webhook requires it", args: []string{"webhook"}, wantErr: "--config: required"},
		{name: "no earlier name elsewhere", args: []string{"spread", "--scheduler-config=" + missing}, wantErr: "unknown flag: --scheduler-config"},
		// Decoded once, before any mode completes: a profile the file lacks is refused by name.
		{name: "no such profile", args: []string{"handoff", "--config=" + shipped, "--scheduler-name=other"}, wantErr: `--scheduler-name "other", --config ` + shipped + `: no profile with schedulerName "other"`},
		{name: "not a configuration", args: []string{"spread", "--config=" + notConfig}, wantErr: "--config " + notConfig + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			// A kubeconfig that does not exist: reaching it would fail with another error.
			cmd.SetArgs(append(tt.args, "--kubeconfig=/nonexistent"))
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestSharedFlags: the flags every mode shares are registered by one function, for the modes
// that use them; the modes that serve nothing (domain, handback) take none of them.
func TestSharedFlags(t *testing.T) {
	serving := []string{"health-probe-bind-address", "metrics-bind-address", "metrics-cert-dir", "metrics-secure"}
	leader := []string{"leader-elect", "leader-elect-lease", "leader-elect-lease-duration", "leader-elect-namespace", "leader-elect-renew-deadline", "leader-elect-retry-period"}
	config := []string{"config", "scheduler-name"}
	client := []string{"kube-api-burst", "kube-api-qps"}
	all := append(append(append(config, serving...), leader...), client...)
	want := map[string][]string{
		"controller": all,
		"domain":     client,
		"webhook":    append(append(config, serving...), client...),
		"handoff":    all,
		"handback":   append([]string{"scheduler-name"}, client...),
		"spread":     all,
		"certs":      append(serving, client...),
	}
	got := map[string][]string{}
	for _, c := range NewCommand().Commands() {
		var names []string
		for _, name := range all {
			if c.Flags().Lookup(name) != nil {
				names = append(names, name)
			}
		}
		got[c.Name()] = names
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shared flags per mode (-want +got):\n%s", diff)
	}
	// One flag, one default: the profile the shipped configuration serves.
	for _, c := range NewCommand().Commands() {
		if f := c.Flags().Lookup("scheduler-name"); f != nil && f.DefValue != profile.DefaultSchedulerName {
			t.Errorf("%s: --scheduler-name defaults to %q, want %q", c.Name(), f.DefValue, profile.DefaultSchedulerName)
		}
	}
}

// TestClientRateFlags: every mode's client rate is refused, naming the flag, where client-go
// would silently apply another (0: its 5/s or burst 10; negative: no limit), before anything is
// connected to.
func TestClientRateFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "zero rate", args: []string{"--kube-api-qps=0"}, wantErr: "--kube-api-qps must be positive, got 0"},
		{name: "negative rate", args: []string{"--kube-api-qps=-1"}, wantErr: "--kube-api-qps must be positive, got -1"},
		{name: "not a number", args: []string{"--kube-api-qps=NaN"}, wantErr: "--kube-api-qps must be positive, got NaN"},
		{name: "zero burst", args: []string{"--kube-api-burst=0"}, wantErr: "--kube-api-burst must be at least 1, got 0"},
	}
	for _, m := range modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				cmd := NewCommand()
				// A kubeconfig that does not exist: reaching it fails with another error. The
				// modes that require --config get a missing one after the rate's check.
				cmd.SetArgs(append([]string{m.name, "--kubeconfig=/nonexistent"}, tt.args...))
				cmd.SetOut(io.Discard)
				cmd.SetErr(io.Discard)
				err := cmd.Execute()
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tt.wantErr)
				}
			})
		}
	}
}

// TestClientRate: the rate of --kube-api-qps and --kube-api-burst (or their defaults) is the
// client config's, so every client the mode makes from it (one per kind) gets it, not
// client-go's 5/s.
func TestClientRate(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		wantQPS   float32
		wantBurst int
	}{
		{name: "defaults", wantQPS: DefaultKubeAPIQPS, wantBurst: DefaultKubeAPIBurst},
		{name: "set", args: []string{"--kube-api-qps=7.5", "--kube-api-burst=15"}, wantQPS: 7.5, wantBurst: 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := kubeconfig
			s := &shared{kubeconfig: &path}
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			s.addFlags(fs, controllerMode)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := s.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.QPS != tt.wantQPS || cfg.Burst != tt.wantBurst {
				t.Errorf("client rate %v/s burst %d, want %v/s burst %d", cfg.QPS, cfg.Burst, tt.wantQPS, tt.wantBurst)
			}
		})
	}
}
