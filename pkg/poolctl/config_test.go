package poolctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func configMap(name string, created time.Time, namespace string) *v1.ConfigMap {
	data := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: pool-scheduler\n  pluginConfig:\n  - name: NodePoolReady\n    args: {labelSetNamespaces: [" + namespace + "]}\n"
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pool-scheduler", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Data:       map[string]string{profile.ConfigKey: data},
	}
}

// TestConfigSourceFindsTheDeployedConfigMap: the exact name first, else the newest
// kustomize-generated NAME-<hash>; other names never; nothing found is an error naming the
// ConfigMap and --config.
func TestConfigSourceFindsTheDeployedConfigMap(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		objects []runtime.Object
		want    string // the labelSetNamespaces of the ConfigMap read
		wantErr string
	}{
		{name: "the chart's name", objects: []runtime.Object{configMap("pool-scheduler-config", t0, "chart"), configMap("pool-scheduler-config-5f8h2k9m7c", t0.Add(time.Hour), "kustomize")}, want: "chart"},
		{name: "the newest generated name", objects: []runtime.Object{configMap("pool-scheduler-config-5f8h2k9m7c", t0, "old"), configMap("pool-scheduler-config-b7c4d2t9kk", t0.Add(time.Hour), "new")}, want: "new"},
		{name: "other names are not it", objects: []runtime.Object{configMap("pool-scheduler-config-backup", t0, "x"), configMap("pool-scheduler-configs", t0, "y")}, wantErr: "pass --config-map NAMESPACE/NAME, or --config"},
		{name: "nothing", wantErr: "pool-scheduler/pool-scheduler-config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := configSource{configMap: DefaultConfigMap, schedulerName: "pool-scheduler"}
			args, source, err := s.load(context.Background(), fake.NewClientset(tt.objects...), "https://test")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := args.NodePoolReady.LabelSetNamespaces; len(got) != 1 || got[0] != tt.want {
				t.Errorf("read the ConfigMap with labelSetNamespaces %q (%s), want [%q]", got, source, tt.want)
			}
		})
	}
	if _, _, err := (&configSource{configMap: "no-slash"}).load(context.Background(), fake.NewClientset(), "h"); err == nil || !strings.Contains(err.Error(), "NAMESPACE/NAME") {
		t.Errorf("--config-map without a namespace: %v", err)
	}
}
