package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kubernetes/test/utils/ktesting"
	"sigs.k8s.io/yaml"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestNodePoolLabelSetCRDValidation applies NodePoolLabelSets to a real apiserver with the CRD
// from manifests/crds and checks what the CRD's schema and CEL rules accept.
func TestNodePoolLabelSetCRDValidation(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	ns := util.CreateNamespace(tCtx, t, cp.Client, "crd")

	tests := []struct {
		name    string
		labels  map[string]string
		wantErr string
	}{
		{name: "plain keys", labels: map[string]string{"example.com/lifecycle": "spot", "team": "data", "a.b.c/d_e.f-g": ""}},
		{name: "node-role is allowed", labels: map[string]string{"node-role.kubernetes.io/spot": ""}},
		{name: "node-restriction is allowed", labels: map[string]string{"node-restriction.kubernetes.io/pool": "spot"}},
		{name: "kubernetes.io in a longer domain is not reserved", labels: map[string]string{"kubernetes.io.example.com/x": "1", "notkubernetes.io/x": "1"}},
		{name: "kubernetes.io key", labels: map[string]string{"kubernetes.io/arch": "arm64"}, wantErr: "reserved for Kubernetes"},
		{name: "kubernetes.io subdomain key", labels: map[string]string{"node.kubernetes.io/instance-type": "big"}, wantErr: "reserved for Kubernetes"},
		{name: "k8s.io key", labels: map[string]string{"k8s.io/x": "1"}, wantErr: "reserved for Kubernetes"},
		{name: "k8s.io subdomain key", labels: map[string]string{"sub.k8s.io/x": "1"}, wantErr: "reserved for Kubernetes"},
		// cloud-provider-azure keeps nodes with these out of its load balancers.
		{name: "kubernetes.azure.com/managed", labels: map[string]string{"kubernetes.azure.com/managed": "false"}, wantErr: "take a node out of Azure's load balancers"},
		{name: "kubernetes.azure.com/resource-group", labels: map[string]string{"kubernetes.azure.com/resource-group": "elsewhere"}, wantErr: "take a node out of Azure's load balancers"},
		{name: "control-plane role", labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}, wantErr: "take a node out of Azure's load balancers"},
		{name: "another node role", labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
		{name: "the domain labeler's update-domain key", labels: map[string]string{"topology.pool-scheduler.io/update-domain": "3"}, wantErr: "written on each node by pool-labeler's domain mode"},
		{name: "the domain labeler's fault-domain key", labels: map[string]string{"example.com/a": "1", "topology.pool-scheduler.io/fault-domain": "1"}, wantErr: "written on each node by pool-labeler's domain mode"},
		{name: "any key of the domain labeler's prefix", labels: map[string]string{"topology.pool-scheduler.io/rack": "r1"}, wantErr: "written on each node by pool-labeler's domain mode"},
		{name: "other pool-scheduler.io keys are not the domain labeler's", labels: map[string]string{"x.topology.pool-scheduler.io/y": "1", "pool-scheduler.io/team": "a"}},
		{name: "invalid key", labels: map[string]string{"bad key": "1"}, wantErr: "qualified name"},
		{name: "key name too long", labels: map[string]string{"example.com/" + strings.Repeat("a", 64): "1"}, wantErr: "qualified name"},
		{name: "uppercase prefix", labels: map[string]string{"Example.com/a": "1"}, wantErr: "qualified name"},
		{name: "invalid value", labels: map[string]string{"example.com/a": "not valid!"}, wantErr: "spec.labels.example.com/a"},
		{name: "value too long", labels: map[string]string{"example.com/a": strings.Repeat("v", 64)}, wantErr: "spec.labels.example.com/a"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := util.ApplyLabelSet(tCtx, cp, util.LabelSet(ns, "pool-"+string(rune('a'+i)), tt.labels))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("accepted, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			case err != nil:
				t.Logf("rejected as expected: %v", err)
			}
		})
	}
}

// TestCRDRefusesIdentityKeys: a NodePoolLabelSet may set a pool-identity key (one of the
// default poolLabelKeys) only to its own name: another value would move the node to another
// pool and back, forever. The real apiserver applies the CRD's CEL rule.
func TestCRDRefusesIdentityKeys(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	ns := util.CreateNamespace(tCtx, t, cp.Client, "crd-identity")
	tests := []struct {
		name    string
		set     string
		labels  map[string]string
		wantErr bool
	}{
		{name: "identity key with its own name (Banzai's CRs)", set: "spot", labels: map[string]string{"nodepool.banzaicloud.io/name": "spot", "example.com/a": "1"}},
		{name: "identity key with another pool's name", set: "spot2", labels: map[string]string{"nodepool.banzaicloud.io/name": "gpu"}, wantErr: true},
		{name: "another identity key", set: "spot3", labels: map[string]string{"example.com/a": "1", "kubernetes.azure.com/agentpool": "system"}, wantErr: true},
		{name: "karpenter's key", set: "spot4", labels: map[string]string{"karpenter.sh/nodepool": "default"}, wantErr: true},
		{name: "a similar key that is no identity key", set: "spot5", labels: map[string]string{"example.com/agentpool": "other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := util.ApplyLabelSet(tCtx, cp, util.LabelSet(ns, tt.set, tt.labels))
			switch {
			case !tt.wantErr && err != nil:
				t.Fatalf("rejected: %v", err)
			case tt.wantErr && err == nil:
				t.Fatal("accepted")
			case tt.wantErr && !strings.Contains(err.Error(), "pool-identity label key may only be set to the NodePoolLabelSet's own name"):
				t.Fatalf("error %q does not say why", err)
			case err != nil:
				t.Logf("rejected as expected: %v", err)
			}
		})
	}
}

// TestBanzaiNodePoolLabelSetIsAccepted applies a CR written for the Banzai operator unchanged.
func TestBanzaiNodePoolLabelSetIsAccepted(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	data, err := os.ReadFile(filepath.Join("testdata", "banzai-nodepoollabelset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetNamespace()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(u.GetNamespace()).Create(tCtx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Banzai CR rejected: %v", err)
	}
	labels, _, _ := unstructured.NestedStringMap(got.Object, "spec", "labels")
	if len(labels) != 5 {
		t.Errorf("stored labels %v, want the 5 labels of the CR", labels)
	}
}
