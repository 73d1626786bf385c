package integration

import (
	"context"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

type kubeConfigHandle struct {
	framework.Handle
	cfg *rest.Config
}

func (h kubeConfigHandle) KubeConfig() *rest.Config { return h.cfg }

// SnapshotSharedLister: none, so the plugin's node memo is never compacted (it still answers).
func (h kubeConfigHandle) SnapshotSharedLister() framework.SharedLister { return nil }

// SharedInformerFactory: none, so the plugin does not watch nodes becoming ready.
func (h kubeConfigHandle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

// TestNodePoolReadyWithoutCRD: on a cluster without the NodePoolLabelSet CRD the plugin starts
// (it does not wait for an informer that cannot sync) and enforces what it can: required keys.
func TestNodePoolReadyWithoutCRD(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	name := "nodepoollabelsets.labels.banzaicloud.io"
	if err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(tCtx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.Discovery().ServerResourcesForGroupVersion("labels.banzaicloud.io/v1alpha1")
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("CRD still served")
	}
	args := configscheme.DefaultNodePoolReadyArgs()
	args.RequiredLabelKeys = []string{updateDomainKey}
	ctx, cancel := context.WithCancel(tCtx)
	defer cancel()
	plugin, err := nodepoolready.New(ctx, args, kubeConfigHandle{cfg: cp.Config})
	if err != nil {
		t.Fatalf("New without the CRD: %v", err)
	}
	pl := plugin.(*nodepoolready.NodePoolReady)
	state := framework.NewCycleState()
	pod := st.MakePod().Obj()
	pl.PreFilter(ctx, state, pod, nil)
	check := func(node *st.NodeWrapper) *fwk.Status {
		ni := framework.NewNodeInfo()
		ni.SetNode(node.Obj())
		return pl.Filter(ctx, state, pod, ni)
	}
	if s := check(st.MakeNode().Name("a").Label(updateDomainKey, "0")); !s.IsSuccess() {
		t.Errorf("labelled node refused: %v", s)
	}
	if s := check(st.MakeNode().Name("b")); s.IsSuccess() {
		t.Error("node without the required key accepted")
	}
}
