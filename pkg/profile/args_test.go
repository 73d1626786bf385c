package profile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"

// TestLoadProfileArgs: the profile is found by name (or is the first), plugins without
// pluginConfig get the scheme's defaults, given args are defaulted and validated, and every
// error names what is wrong.
func TestLoadProfileArgs(t *testing.T) {
	tests := []struct {
		name          string
		config        string
		schedulerName string
		wantName      string
		wantKeys      []string // NodePoolReady's poolLabelKeys
		wantNS        []string // NodePoolReady's labelSetNamespaces
		wantErr       string
	}{
		{name: "first profile, defaults", config: header + "- schedulerName: a\n- schedulerName: b\n",
			wantName: "a", wantKeys: configv1.DefaultPoolLabelKeys},
		{name: "named profile, explicit args defaulted", schedulerName: "b",
			config:   header + "- schedulerName: a\n- schedulerName: b\n  pluginConfig:\n  - name: NodePoolReady\n    args: {poolLabelKeys: [pool], labelSetNamespaces: [x]}\n",
			wantName: "b", wantKeys: []string{"pool"}, wantNS: []string{"x"}},
		{name: "no such profile", schedulerName: "c", config: header + "- schedulerName: a\n",
			wantErr: `no profile with schedulerName "c" (profiles: a)`},
		{name: "invalid args name the field", config: header + "- schedulerName: a\n  pluginConfig:\n  - name: NodePoolReady\n    args: {labelSetNamespaces: [Not_A_Namespace]}\n",
			wantErr: "profiles[a].pluginConfig[0].args.labelSetNamespaces[0]"},
		{name: "unknown field (strict, as kube-scheduler)", config: header + "- schedulerName: a\n  pluginConfig:\n  - name: NodePoolReady\n    args: {poolLabelKey: [pool]}\n",
			wantErr: "poolLabelKey"},
		{name: "not a scheduler configuration", config: "apiVersion: v1\nkind: ConfigMap\n", wantErr: "ConfigMap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, args, err := LoadProfileArgs([]byte(tt.config), tt.schedulerName)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.wantName {
				t.Errorf("profile %q, want %q", name, tt.wantName)
			}
			if diff := cmp.Diff(tt.wantKeys, args.NodePoolReady.PoolLabelKeys); diff != "" {
				t.Errorf("poolLabelKeys (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNS, args.NodePoolReady.LabelSetNamespaces); diff != "" {
				t.Errorf("labelSetNamespaces (-want +got):\n%s", diff)
			}
			// The plugins not configured are the scheme's defaults, like DefaultArgs.
			if diff := cmp.Diff(DefaultArgs().DomainSpread, args.DomainSpread); diff != "" {
				t.Errorf("DomainSpread args are not the defaults (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultArgsAreTheSchemeDefaults: DefaultArgs is what defaulting the v1 types gives, so the
// system-node selector AKS needs is in it, and each call returns a copy of its own.
func TestDefaultArgsAreTheSchemeDefaults(t *testing.T) {
	a := DefaultArgs()
	if diff := cmp.Diff(configv1.DefaultSystemNodeSelector(), a.SystemPoolGuard.SystemNodeSelector); diff != "" {
		t.Errorf("SystemPoolGuard's systemNodeSelector (-want +got):\n%s", diff)
	}
	if got := a.DomainSpread.Mode; got != config.SpreadSoft {
		t.Errorf("DomainSpread mode %q, want %q", got, config.SpreadSoft)
	}
	a.NodePoolReady.PoolLabelKeys[0] = "changed"
	if DefaultArgs().NodePoolReady.PoolLabelKeys[0] == "changed" {
		t.Error("DefaultArgs shares its lists between calls")
	}
}

func configMap(name string, created time.Time, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: name, CreationTimestamp: metav1.NewTime(created)}, Data: data}
}

// TestReadConfigMap: the exact name first, else the newest kustomize-generated NAME-<hash>,
// other names never; a ConfigMap without the key is an error naming it.
func TestReadConfigMap(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		objects  []runtime.Object
		want     string
		notFound bool
		wantErr  string
	}{
		{name: "exact name", objects: []runtime.Object{configMap("pool-scheduler-config", t0, map[string]string{ConfigKey: "exact"}), configMap("pool-scheduler-config-5f8h2k9m7c", t0.Add(time.Hour), map[string]string{ConfigKey: "generated"})}, want: "exact"},
		{name: "newest generated", objects: []runtime.Object{configMap("pool-scheduler-config-5f8h2k9m7c", t0, map[string]string{ConfigKey: "old"}), configMap("pool-scheduler-config-b7c4d2t9kk", t0.Add(time.Hour), map[string]string{ConfigKey: "new"})}, want: "new"},
		{name: "other names", objects: []runtime.Object{configMap("pool-scheduler-config-backup", t0, map[string]string{ConfigKey: "x"})}, notFound: true},
		{name: "no key", objects: []runtime.Object{configMap("pool-scheduler-config", t0, map[string]string{"other.yaml": "x"})}, wantErr: "ConfigMap pool-scheduler/pool-scheduler-config has no config.yaml key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, _, err := ReadConfigMap(context.Background(), fake.NewClientset(tt.objects...), "pool-scheduler", "pool-scheduler-config")
			switch {
			case tt.notFound:
				if !errors.Is(err, ErrConfigMapNotFound) {
					t.Fatalf("error %v, want ErrConfigMapNotFound", err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case string(data) != tt.want:
				t.Errorf("read %q, want %q", data, tt.want)
			}
		})
	}
}

// TestEnabled: a plugin is enabled when a profile lists it under multiPoint or an extension
// point and does not disable it; the shipped profile enables all three.
func TestEnabled(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: p\n"
	tests := []struct {
		name   string
		config string
		want   bool
	}{
		{name: "multiPoint", config: head + "  plugins: {multiPoint: {enabled: [{name: DomainSpread}]}}\n", want: true},
		{name: "score only", config: head + "  plugins: {score: {enabled: [{name: DomainSpread}]}}\n", want: true},
		{name: "not listed", config: head, want: false},
		{name: "listed and disabled", config: head + "  plugins: {multiPoint: {enabled: [{name: DomainSpread}], disabled: [{name: DomainSpread}]}}\n", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadProfile([]byte(tt.config), "p")
			if err != nil {
				t.Fatal(err)
			}
			if got := Enabled(p, "DomainSpread"); got != tt.want {
				t.Errorf("Enabled = %v, want %v", got, tt.want)
			}
		})
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "scheduler", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadProfile(data, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"NodePoolReady", "SystemPoolGuard", "DomainSpread"} {
		if !Enabled(p, name) {
			t.Errorf("the shipped profile does not enable %s", name)
		}
	}
}
