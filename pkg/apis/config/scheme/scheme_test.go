package scheme

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pool-scheduler
  pluginConfig:
  - name: NodePoolReady
`

func decodeArgs(t *testing.T, yaml string) (any, error) {
	t.Helper()
	obj, _, err := Codecs.UniversalDecoder().Decode([]byte(yaml), nil, nil)
	if err != nil {
		return nil, err
	}
	cfg := obj.(*schedconfig.KubeSchedulerConfiguration)
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "NodePoolReady" {
			return pc.Args, nil
		}
	}
	t.Fatalf("no NodePoolReady args decoded")
	return nil, nil
}

func TestDecodeNodePoolReadyArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    *config.NodePoolReadyArgs
		wantErr string
	}{
		{
			name: "empty args get defaults",
			args: "    args: {}\n",
			want: &config.NodePoolReadyArgs{
				PoolLabelKeys:       configv1.DefaultPoolLabelKeys,
				UnknownPoolPolicy:   config.UnknownPoolAuto,
				IgnoreDaemonSetPods: true,
			},
		},
		{
			name: "every field set",
			args: `    args:
      poolLabelKeys: [example.com/pool]
      requiredLabelKeys: [topology.pool-scheduler.io/update-domain]
      poolRequiredLabelKeys:
        gpu: [nvidia.com/gpu.product]
      unknownPoolPolicy: Reject
      labelSetNamespaces: [pool-scheduler, pipeline-system]
      ignoreDaemonSetPods: false
`,
			want: &config.NodePoolReadyArgs{
				PoolLabelKeys:         []string{"example.com/pool"},
				RequiredLabelKeys:     []string{"topology.pool-scheduler.io/update-domain"},
				PoolRequiredLabelKeys: map[string][]string{"gpu": {"nvidia.com/gpu.product"}},
				UnknownPoolPolicy:     config.UnknownPoolReject,
				LabelSetNamespaces:    []string{"pool-scheduler", "pipeline-system"},
				IgnoreDaemonSetPods:   false,
			},
		},
		{
			name: "deprecated labelSetNamespace is read as a one-element labelSetNamespaces",
			args: "    args:\n      labelSetNamespace: pipeline-system\n",
			want: &config.NodePoolReadyArgs{
				PoolLabelKeys:       configv1.DefaultPoolLabelKeys,
				UnknownPoolPolicy:   config.UnknownPoolAuto,
				LabelSetNamespaces:  []string{"pipeline-system"},
				IgnoreDaemonSetPods: true,
			},
		},
		{
			name: "deprecated labelSetNamespace inside labelSetNamespaces is accepted",
			args: "    args:\n      labelSetNamespace: pipeline-system\n      labelSetNamespaces: [pool-scheduler, pipeline-system]\n",
			want: &config.NodePoolReadyArgs{
				PoolLabelKeys:       configv1.DefaultPoolLabelKeys,
				UnknownPoolPolicy:   config.UnknownPoolAuto,
				LabelSetNamespaces:  []string{"pool-scheduler", "pipeline-system"},
				IgnoreDaemonSetPods: true,
			},
		},
		{
			name: "deprecated labelSetNamespace outside labelSetNamespaces is read too",
			args: "    args:\n      labelSetNamespace: pipeline-system\n      labelSetNamespaces: [pool-scheduler]\n",
			want: &config.NodePoolReadyArgs{
				PoolLabelKeys:       configv1.DefaultPoolLabelKeys,
				UnknownPoolPolicy:   config.UnknownPoolAuto,
				LabelSetNamespaces:  []string{"pool-scheduler", "pipeline-system"},
				IgnoreDaemonSetPods: true,
			},
		},
		{
			name:    "unknown field is refused by name",
			args:    "    args:\n      requiredLabelKey: [a]\n",
			wantErr: `unknown field "requiredLabelKey"`,
		},
		{
			name:    "duplicate field is refused",
			args:    "    args:\n      unknownPoolPolicy: Auto\n      unknownPoolPolicy: Allow\n",
			wantErr: `unknownPoolPolicy`,
		},
		{
			name:    "wrong type is refused",
			args:    "    args:\n      requiredLabelKeys: topology.pool-scheduler.io/update-domain\n",
			wantErr: "requiredLabelKeys",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeArgs(t, header+tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("decode error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultPoolLabelKeysAreACopy(t *testing.T) {
	got, err := decodeArgs(t, header+"    args: {}\n")
	if err != nil {
		t.Fatal(err)
	}
	args := got.(*config.NodePoolReadyArgs)
	args.PoolLabelKeys[0] = "changed"
	if configv1.DefaultPoolLabelKeys[0] == "changed" {
		t.Fatal("defaulting shares configv1.DefaultPoolLabelKeys with the args")
	}
}

func TestDecodeSystemPoolGuardArgs(t *testing.T) {
	const sysHeader = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pool-scheduler
  pluginConfig:
  - name: SystemPoolGuard
`
	decode := func(args string) (*config.SystemPoolGuardArgs, error) {
		obj, _, err := Codecs.UniversalDecoder().Decode([]byte(sysHeader+args), nil, nil)
		if err != nil {
			return nil, err
		}
		return obj.(*schedconfig.KubeSchedulerConfiguration).Profiles[0].PluginConfig[0].Args.(*config.SystemPoolGuardArgs), nil
	}
	tests := []struct {
		name    string
		args    string
		want    *config.SystemPoolGuardArgs
		wantErr string
	}{
		{
			name: "defaults: the system pool and AKS system-mode nodes",
			args: "    args: {}\n",
			want: &config.SystemPoolGuardArgs{
				PoolLabelKeys:              configv1.DefaultPoolLabelKeys,
				SystemPools:                []string{"system"},
				SystemNodeSelector:         &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}},
				SystemNamespaces:           []string{"kube-system"},
				SystemPriorityClasses:      []string{"system-cluster-critical", "system-node-critical"},
				SystemTolerationKeys:       []string{"CriticalAddonsOnly"},
				DaemonSetPodsAreSystemPods: true,
			},
		},
		{
			name: "AKS: selector only, explicit empty lists switch rules off",
			args: `    args:
      systemPools: []
      systemNodeSelector:
        matchLabels:
          kubernetes.azure.com/mode: system
      systemTolerationKeys: []
      daemonSetPodsAreSystemPods: false
`,
			want: &config.SystemPoolGuardArgs{
				PoolLabelKeys:         configv1.DefaultPoolLabelKeys,
				SystemPools:           []string{},
				SystemNodeSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}},
				SystemNamespaces:      []string{"kube-system"},
				SystemPriorityClasses: []string{"system-cluster-critical", "system-node-critical"},
				SystemTolerationKeys:  []string{},
			},
		},
		{
			name: "an empty selector switches the AKS default off",
			args: "    args:\n      systemNodeSelector: {}\n",
			want: &config.SystemPoolGuardArgs{
				PoolLabelKeys:              configv1.DefaultPoolLabelKeys,
				SystemPools:                []string{"system"},
				SystemNodeSelector:         &metav1.LabelSelector{},
				SystemNamespaces:           []string{"kube-system"},
				SystemPriorityClasses:      []string{"system-cluster-critical", "system-node-critical"},
				SystemTolerationKeys:       []string{"CriticalAddonsOnly"},
				DaemonSetPodsAreSystemPods: true,
			},
		},
		{name: "unknown field", args: "    args:\n      systemPool: [system]\n", wantErr: `unknown field "systemPool"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeDomainSpreadArgs(t *testing.T) {
	const dsHeader = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pool-scheduler
  pluginConfig:
  - name: DomainSpread
`
	decode := func(args string) (*config.DomainSpreadArgs, error) {
		obj, _, err := Codecs.UniversalDecoder().Decode([]byte(dsHeader+args), nil, nil)
		if err != nil {
			return nil, err
		}
		return obj.(*schedconfig.KubeSchedulerConfiguration).Profiles[0].PluginConfig[0].Args.(*config.DomainSpreadArgs), nil
	}
	defaults := &config.DomainSpreadArgs{
		Dimensions: []config.SpreadDimension{
			// The zone first; pool-labeler's fault domain (repeating in every zone) only where a node has no zone label.
			{Name: "zone", LabelKeys: []string{"topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.azure.com/fault-domain", "topology.pool-scheduler.io/fault-domain"}},
			{Name: "update-domain", LabelKeys: []string{"topology.pool-scheduler.io/update-domain"}},
			{Name: "host", LabelKeys: []string{"kubernetes.io/hostname"}},
		},
		Mode:               config.SpreadSoft,
		MaxSkew:            1,
		DeletionCostAtBind: true,
	}
	tests := []struct {
		name    string
		args    string
		want    *config.DomainSpreadArgs
		wantErr string
	}{
		{name: "defaults", args: "    args: {}\n", want: defaults},
		{
			name: "OCI-style joint keys, hard mode",
			args: `    args:
      mode: Hard
      maxSkew: 2
      rejectNodesMissingKeys: true
      spreadPodsWithConstraints: true
      deletionCostAtBind: false
      dimensions:
      - name: zone
        labelKeys: [topology.kubernetes.io/zone]
      - name: fault-domain
        labelKeys: [oci.oraclecloud.com/fault-domain]
        joint: true
`,
			want: &config.DomainSpreadArgs{
				Dimensions: []config.SpreadDimension{
					{Name: "zone", LabelKeys: []string{"topology.kubernetes.io/zone"}},
					{Name: "fault-domain", LabelKeys: []string{"oci.oraclecloud.com/fault-domain"}, Joint: true},
				},
				Mode: config.SpreadHard, MaxSkew: 2, RejectNodesMissingKeys: true, SpreadPodsWithConstraints: true,
			},
		},
		{name: "unknown field in a dimension", args: "    args:\n      dimensions:\n      - name: a\n        labelKey: [x]\n", wantErr: `unknown field "dimensions[0].labelKey"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
