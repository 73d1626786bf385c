package labeler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

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

// TestOptionsComplete: with --config the labeler judges nodes by the scheduler's NodePoolReady
// args (and SystemPoolGuard's system-node keys, which sets may not name) and reads the sets of
// its labelSetNamespaces; flags that disagree are refused.
func TestOptionsComplete(t *testing.T) {
	const path = "/etc/pool-scheduler/config.yaml"
	// The nodepool-labels-operator's namespace beside the release namespace.
	two := strings.Replace(testSchedulerConfig, "labelSetNamespace: pool-system", "labelSetNamespaces: [pool-system, pipeline-system]", 1)
	// SystemPoolGuard's systemNodeSelector: its keys are refused to label sets (#34).
	system := testSchedulerConfig + `  - name: SystemPoolGuard
    args:
      systemNodeSelector: {matchLabels: {example.com/system: "true"}, matchExpressions: [{key: example.com/role, operator: Exists}]}
`
	withConfig := func(data string, f Options) Options {
		p, err := profile.Load(path, []byte(data), "pool-scheduler")
		if err != nil {
			t.Fatal(err)
		}
		f.Profile = p
		return f
	}
	aks := []string{"kubernetes.azure.com/mode"}
	tests := []struct {
		name           string
		flags          Options
		wantGate       pool.Gate
		wantNamespaces []string
		wantErr        string
	}{
		{
			name:           "no config: the plugin's defaults and --pool-label-keys",
			flags:          Options{PoolLabelKeys: []string{"a.io/pool"}, PoolLabelKeysSet: true, Namespaces: []string{"ns"}, NamespacesSet: true},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"a.io/pool"}), UnknownPoolPolicy: config.UnknownPoolAuto, SystemNodeKeys: aks},
			wantNamespaces: []string{"ns"},
		},
		{
			name:           "the scheduler's args and namespace",
			flags:          withConfig(testSchedulerConfig, Options{}),
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pool-system"},
		},
		{
			name:           "the same namespace given twice is fine",
			flags:          withConfig(testSchedulerConfig, Options{Namespaces: []string{"pool-system"}, NamespacesSet: true}),
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pool-system"},
		},
		{
			name:           "the scheduler's systemNodeSelector",
			flags:          withConfig(system, Options{}),
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: []string{"example.com/system", "example.com/role"}},
			wantNamespaces: []string{"pool-system"},
		},
		{name: "another namespace", flags: withConfig(testSchedulerConfig, Options{Namespaces: []string{"other"}, NamespacesSet: true}), wantErr: `disagrees with the scheduler's labelSetNamespaces ["pool-system"]`},
		{
			name:           "two namespaces",
			flags:          withConfig(two, Options{}),
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pool-system", "pipeline-system"},
		},
		{
			name:           "two namespaces given again in another order",
			flags:          withConfig(two, Options{Namespaces: []string{"pipeline-system", "pool-system"}, NamespacesSet: true}),
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}, SystemNodeKeys: aks},
			wantNamespaces: []string{"pipeline-system", "pool-system"},
		},
		{name: "one of two namespaces", flags: withConfig(two, Options{Namespaces: []string{"pool-system"}, NamespacesSet: true}), wantErr: `disagrees with the scheduler's labelSetNamespaces ["pool-system" "pipeline-system"]`},
		{name: "pool keys from two places", flags: withConfig(testSchedulerConfig, Options{PoolLabelKeys: []string{"a.io/pool"}, PoolLabelKeysSet: true}), wantErr: "--pool-label-keys: not with --config"},
		{name: "all namespaces with the configuration", flags: withConfig(testSchedulerConfig, Options{AllNamespaces: true}), wantErr: "--all-namespaces: not with --config"},
		{name: "bad pool label key", flags: Options{PoolLabelKeys: []string{"not a key"}}, wantErr: "--pool-label-keys"},
		{name: "negative hold warning", flags: Options{HoldWarningAfter: -1}, wantErr: "--hold-warning-after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.flags
			err := got.Complete()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantGate, got.Gate, cmp.AllowUnexported(pool.Identity{})); diff != "" {
				t.Errorf("gate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNamespaces, got.Namespaces, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("namespaces (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamespacesWithoutConfig: without --config the controller applies the
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
			wantWarning: []string{"namespace pool-scheduler only", "--namespaces=", "--all-namespaces", "--config"}},
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
