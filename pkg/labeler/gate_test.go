package labeler

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
// NodePoolReady args and reads the sets of its labelSetNamespaces; flags that disagree are refused.
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
			wantGate: pool.Gate{Identity: pool.NewIdentity([]string{"a.io/pool"}), UnknownPoolPolicy: config.UnknownPoolAuto},
		},
		{
			name:           "the scheduler's args and namespace",
			args:           []string{"--scheduler-config=" + path},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}},
			wantNamespaces: []string{"pool-system"},
		},
		{
			name:           "the same namespace given twice is fine",
			args:           []string{"--scheduler-config=" + path, "--namespaces=pool-system"},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}},
			wantNamespaces: []string{"pool-system"},
		},
		{name: "another namespace", args: []string{"--scheduler-config=" + path, "--namespaces=other"}, wantErr: `disagrees with the scheduler's labelSetNamespaces ["pool-system"]`},
		{
			name:           "two namespaces",
			args:           []string{"--scheduler-config=" + two},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}},
			wantNamespaces: []string{"pool-system", "pipeline-system"},
		},
		{
			name:           "two namespaces given again in another order",
			args:           []string{"--scheduler-config=" + two, "--namespaces=pipeline-system,pool-system"},
			wantGate:       pool.Gate{Identity: pool.NewIdentity([]string{"example.com/pool"}), UnknownPoolPolicy: config.UnknownPoolReject, RequiredLabelKeys: []string{"example.com/zone"}},
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

// TestHolds: a hold starts when a node is first seen held (or at the time a status recorded),
// survives a change of reason, ends when the node is ready; the warning is due once, after the
// configured time.
func TestHolds(t *testing.T) {
	h := newHolds()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	missing := pool.Verdict{Cause: pool.LabelsNotApplied, Pool: "spot", Key: "k", Missing: true}
	stale := pool.Verdict{Cause: pool.StaleLabel, Pool: "spot", Key: "old"}

	if since := h.observe("n1", missing, t0, time.Time{}); !since.Equal(t0) {
		t.Errorf("first hold since %v, want %v", since, t0)
	}
	if since := h.observe("n1", stale, t0.Add(time.Minute), time.Time{}); !since.Equal(t0) {
		t.Errorf("a new reason restarted the hold: since %v, want %v", since, t0)
	}
	recorded := t0.Add(-time.Hour)
	if since := h.observe("n2", missing, t0, recorded); !since.Equal(recorded) {
		t.Errorf("hold seeded from status since %v, want %v", since, recorded)
	}
	if due, wait := h.warn("n1", t0.Add(2*time.Minute), 5*time.Minute); due || wait != 3*time.Minute {
		t.Errorf("warn after 2m of 5m = %v, %v; want not due, 3m to wait", due, wait)
	}
	if due, _ := h.warn("n1", t0.Add(5*time.Minute), 5*time.Minute); !due {
		t.Error("warn after 5m of 5m: not due")
	}
	if due, wait := h.warn("n1", t0.Add(6*time.Minute), 5*time.Minute); due || wait != 0 {
		t.Errorf("second warn = %v, %v; want none", due, wait)
	}
	if due, wait := h.warn("n2", t0, 0); due || wait != 0 {
		t.Errorf("warn with the event off = %v, %v; want none", due, wait)
	}

	got := map[string]map[string]int{}
	for p, ph := range h.byPool() {
		got[p] = ph.byReason
		if p == "spot" && !ph.oldest.Equal(recorded) {
			t.Errorf("oldest hold of spot %v, want %v", ph.oldest, recorded)
		}
	}
	if diff := cmp.Diff(map[string]map[string]int{"spot": {"StaleLabel": 1, "MissingLabel": 1}}, got); diff != "" {
		t.Errorf("holds by pool (-want +got):\n%s", diff)
	}
	h.observe("n1", pool.Verdict{Cause: pool.Ready, Pool: "spot"}, t0.Add(7*time.Minute), time.Time{})
	h.forget("n2")
	if n := len(h.byPool()); n != 0 {
		t.Errorf("%d pools still held after the nodes became ready or went away", n)
	}
}
