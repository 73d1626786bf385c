package app

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
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

const testSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pool-scheduler
  pluginConfig:
  - name: NodePoolReady
    args:
      poolLabelKeys: [example.com/pool]
      requiredLabelKeys: [example.com/zone]
      unknownPoolPolicy: Reject
      labelSetNamespace: pool-system
`

// TestControllerGate: with --scheduler-config the labeler judges nodes by the scheduler's
// NodePoolReady args (and SystemPoolGuard's system-node keys, which sets may not name) and reads the sets of its labelSetNamespaces; flags that disagree are refused.
func TestControllerGate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(testSchedulerConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// The nodepool-labels-operator's namespace beside the release namespace.
	two := filepath.Join(t.TempDir(), "two.yaml")
	if err := os.WriteFile(two, []byte(strings.Replace(testSchedulerConfig, "labelSetNamespace: pool-system", "labelSetNamespaces: [pool-system, pipeline-system]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// SystemPoolGuard's systemNodeSelector: its keys are refused to label sets (#34).
	system := filepath.Join(t.TempDir(), "system.yaml")
	if err := os.WriteFile(system, []byte(testSchedulerConfig+`  - name: SystemPoolGuard
    args:
      systemNodeSelector: {matchLabels: {example.com/system: "true"}, matchExpressions: [{key: example.com/role, operator: Exists}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	aks := []string{"kubernetes.azure.com/mode"}
	tests := []struct {
		name           string
		args           []string
		wantGate       pool.Gate
		wantNamespaces []string
		wantErr        string
	}{
		{
			name:     "no config: the plugin's defaults and --pool-label-keys",
			args:     []string{"--pool-label-keys=a.io/pool"},
			wantGate: pool.Gate{Identity: pool.NewIdentity([]string{"a.io/pool"}), UnknownPoolPolicy: config.UnknownPoolAuto, SystemNodeKeys: aks},
		},
		{
			name:           "the scheduler's args and namespace",
			args:           []string{"--scheduler-config=" + path},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pool-system"},
		},
		{
			name:           "the same namespace given twice is fine",
			args:           []string{"--scheduler-config=" + path, "--namespaces=pool-system"},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pool-system"},
		},
		{
			name:           "the scheduler's systemNodeSelector",
			args:           []string{"--scheduler-config=" + system},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: []string{"example.com/system", "example.com/role"}},
			wantNamespaces: []string{"pool-system"},
		},
		{name: "another namespace", args: []string{"--scheduler-config=" + path, "--namespaces=other"}, wantErr: `disagrees with the scheduler's labelSetNamespaces ["pool-system"]`},
		{
			name:           "two namespaces",
			args:           []string{"--scheduler-config=" + two},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pool-system", "pipeline-system"},
		},
		{
			name:           "two namespaces given again in another order",
			args:           []string{"--scheduler-config=" + two, "--namespaces=pipeline-system,pool-system"},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pipeline-system", "pool-system"},
		},
		{name: "one of two namespaces", args: []string{"--scheduler-config=" + two, "--namespaces=pool-system"}, wantErr: `disagrees with the scheduler's labelSetNamespaces ["pool-system" "pipeline-system"]`},
		{name: "pool keys from two places", args: []string{"--scheduler-config=" + path, "--pool-label-keys=a.io/pool"}, wantErr: "--pool-label-keys: not with --scheduler-config"},
		{name: "missing file", args: []string{"--scheduler-config=" + path + ".missing"}, wantErr: "--scheduler-config: open"},
		{name: "no such profile", args: []string{"--scheduler-config=" + path, "--scheduler-name=other"}, wantErr: `no profile with schedulerName "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got pool.Gate
			var namespaces []string
			cmd := newControllerCommand(new(string))
			cmd.RunE = func(cmd *cobra.Command, _ []string) error {
				f := cmd.Flags()
				cfg, _ := f.GetString("scheduler-config")
				name, _ := f.GetString("scheduler-name")
				keys, _ := f.GetStringSlice("pool-label-keys")
				namespaces, _ = f.GetStringSlice("namespaces")
				var err error
				got, err = controllerGate(cmd, cfg, name, keys, &namespaces)
				return err
			}
			cmd.SetArgs(tt.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantGate, got, cmp.AllowUnexported(pool.Identity{})); diff != "" {
				t.Errorf("gate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNamespaces, namespaces, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("namespaces (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamespacesWithoutConfig: without --scheduler-config the controller applies the
// NodePoolLabelSets of its own namespace only, with a warning that says how to widen it; every
// namespace must be asked for (--all-namespaces).
func TestNamespacesWithoutConfig(t *testing.T) {
	tests := []struct {
		name          string
		namespacesSet bool
		all           bool
		namespaces    []string
		own           string
		want          []string
		wantWarning   []string
		wantErr       string
	}{
		{name: "nothing given: its own namespace, with a warning", own: "pool-scheduler", want: []string{"pool-scheduler"},
			wantWarning: []string{"namespace pool-scheduler only", "--namespaces=", "--all-namespaces", "--scheduler-config"}},
		{name: "--namespaces", namespacesSet: true, namespaces: []string{"a", "b"}, own: "pool-scheduler", want: []string{"a", "b"}},
		{name: "--all-namespaces: every namespace", all: true, own: "pool-scheduler"},
		{name: "--all-namespaces outside a pod", all: true},
		{name: "both", all: true, namespacesSet: true, namespaces: []string{"a"}, wantErr: "--all-namespaces and --namespaces"},
		{name: "--namespaces given empty", namespacesSet: true, own: "pool-scheduler", wantErr: "--namespaces is empty"},
		{name: "outside a pod, nothing given", wantErr: "no namespace of its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warning, err := namespacesWithoutConfig(tt.namespacesSet, tt.all, tt.namespaces, tt.own)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("namespaces (-want +got):\n%s", diff)
			}
			for _, w := range tt.wantWarning {
				if !strings.Contains(warning, w) {
					t.Errorf("warning %q does not say %q", warning, w)
				}
			}
			if len(tt.wantWarning) == 0 && warning != "" {
				t.Errorf("warning %q, want none", warning)
			}
		})
	}
}

// TestOwnNamespace: $POD_NAMESPACE, else the ServiceAccount's namespace file.
func TestOwnNamespace(t *testing.T) {
	saFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(saFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env, file, want string
	}{
		{name: "POD_NAMESPACE first", env: "from-env", file: saFile, want: "from-env"},
		{name: "the ServiceAccount's file", file: saFile, want: "from-file"},
		{name: "neither", file: saFile + ".missing", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "POD_NAMESPACE" {
					return tt.env
				}
				return ""
			}
			if got := ownNamespace(getenv, tt.file); got != tt.want {
				t.Errorf("ownNamespace = %q, want %q", got, tt.want)
			}
		})
	}
}
