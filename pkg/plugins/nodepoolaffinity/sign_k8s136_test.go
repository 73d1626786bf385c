//go:build k8s136

package nodepoolaffinity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// TestSignPod: the plugin signs a pod with exactly in-tree NodeAffinity's fragments (fragments of
// one key must agree across plugins; the framework keeps one per key).
func TestSignPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	snapshot := cache.NewSnapshot(nil, nil)
	pl := newTestPlugin(t, ctx, snapshot)
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(snapshot))
	if err != nil {
		t.Fatal(err)
	}
	intree, err := nodeaffinity.New(ctx, &schedconfig.NodeAffinityArgs{}, fh, feature.Features{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []*v1.Pod{
		st.MakePod().Name("none").Obj(),
		st.MakePod().Name("selector").NodeSelector(map[string]string{"kubernetes.azure.com/agentpool": "a"}).Obj(),
		st.MakePod().Name("affinity").NodeAffinityIn("kubernetes.azure.com/agentpool", []string{"a", "b"}, st.NodeSelectorTypeMatchExpressions).Obj(),
	} {
		t.Run(pod.Name, func(t *testing.T) {
			got, status := pl.SignPod(ctx, pod)
			if !status.IsSuccess() {
				t.Fatalf("SignPod: %v", status)
			}
			want, status := intree.(fwk.SignPlugin).SignPod(ctx, pod)
			if !status.IsSuccess() {
				t.Fatalf("NodeAffinity's SignPod: %v", status)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("SignPod (-NodeAffinity's +ours):\n%s", diff)
			}
		})
	}
}
