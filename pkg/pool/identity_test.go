package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

func TestPoolOf(t *testing.T) {
	tests := []struct {
		name     string
		keys     []string
		labels   map[string]string
		wantPool string
		wantOK   bool
	}{
		{name: "banzai label", labels: map[string]string{"nodepool.banzaicloud.io/name": "spot"}, wantPool: "spot", wantOK: true},
		{name: "aks agentpool", labels: map[string]string{"kubernetes.azure.com/agentpool": "system"}, wantPool: "system", wantOK: true},
		{name: "legacy aks agentpool", labels: map[string]string{"agentpool": "nodepool1"}, wantPool: "nodepool1", wantOK: true},
		{name: "gke", labels: map[string]string{"cloud.google.com/gke-nodepool": "default-pool"}, wantPool: "default-pool", wantOK: true},
		{name: "eks", labels: map[string]string{"eks.amazonaws.com/nodegroup": "ng-1"}, wantPool: "ng-1", wantOK: true},
		{name: "karpenter", labels: map[string]string{"karpenter.sh/nodepool": "default"}, wantPool: "default", wantOK: true},
		{name: "doks", labels: map[string]string{"doks.digitalocean.com/node-pool": "pool-a"}, wantPool: "pool-a", wantOK: true},
		{
			name:     "first key in the list wins",
			labels:   map[string]string{"kubernetes.azure.com/agentpool": "aks", "nodepool.banzaicloud.io/name": "banzai"},
			wantPool: "banzai", wantOK: true,
		},
		{
			name:     "empty value is skipped",
			labels:   map[string]string{"nodepool.banzaicloud.io/name": "", "agentpool": "fallback"},
			wantPool: "fallback", wantOK: true,
		},
		{name: "no pool label", labels: map[string]string{"kubernetes.io/hostname": "n1"}, wantOK: false},
		{name: "nil labels", labels: nil, wantOK: false},
		{
			name:     "custom keys replace the defaults",
			keys:     []string{"example.com/pool"},
			labels:   map[string]string{"example.com/pool": "a", "nodepool.banzaicloud.io/name": "b"},
			wantPool: "a", wantOK: true,
		},
		{
			name:   "custom keys ignore default keys",
			keys:   []string{"example.com/pool"},
			labels: map[string]string{"nodepool.banzaicloud.io/name": "b"},
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NewIdentity(tt.keys).PoolOf(tt.labels)
			if got != tt.wantPool || ok != tt.wantOK {
				t.Errorf("PoolOf() = (%q, %v), want (%q, %v)", got, ok, tt.wantPool, tt.wantOK)
			}
		})
	}
}

func TestZeroIdentityUsesDefaults(t *testing.T) {
	if diff := cmp.Diff(configv1.DefaultPoolLabelKeys, Identity{}.LabelKeys()); diff != "" {
		t.Errorf("zero Identity keys (-want +got):\n%s", diff)
	}
}

func TestNewIdentityCopiesKeys(t *testing.T) {
	keys := []string{"example.com/pool"}
	id := NewIdentity(keys)
	keys[0] = "changed"
	if got, _ := id.PoolOf(map[string]string{"example.com/pool": "a"}); got != "a" {
		t.Errorf("Identity changed with its caller's slice: PoolOf() = %q", got)
	}
}

func TestPoolOfDoesNotAllocate(t *testing.T) {
	labels := map[string]string{"karpenter.sh/nodepool": "default"}
	id := Identity{}
	if n := testing.AllocsPerRun(100, func() { id.PoolOf(labels) }); n != 0 {
		t.Errorf("PoolOf allocates %v times per call", n)
	}
}

func TestFirstPresentLabel(t *testing.T) {
	keys := []string{"topology.kubernetes.io/zone", "example.com/fault-domain"}
	tests := []struct {
		name   string
		labels map[string]string
		want   string
		wantOK bool
	}{
		{name: "first key", labels: map[string]string{"topology.kubernetes.io/zone": "z1", "example.com/fault-domain": "0"}, want: "z1", wantOK: true},
		{name: "second key", labels: map[string]string{"example.com/fault-domain": "0"}, want: "0", wantOK: true},
		// Unlike PoolOf, an empty value is a value: the key is present.
		{name: "empty value is present", labels: map[string]string{"topology.kubernetes.io/zone": "", "example.com/fault-domain": "0"}, want: "", wantOK: true},
		{name: "none", labels: map[string]string{"kubernetes.io/hostname": "n"}, wantOK: false},
		{name: "nil labels", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FirstPresentLabel(keys, tt.labels)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("FirstPresentLabel() = (%q, %v), want (%q, %v)", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
