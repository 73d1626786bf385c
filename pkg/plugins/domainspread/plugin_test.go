package domainspread

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configscheme "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
)

const (
	fdKey   = "topology.pool-scheduler.io/fault-domain"
	zoneKey = "topology.kubernetes.io/zone"
	udKey   = "topology.pool-scheduler.io/update-domain"
)

func defaultArgs() *config.DomainSpreadArgs {
	return configscheme.DefaultDomainSpreadArgs()
}

func newTestPlugin(tb testing.TB, ctx context.Context, args *config.DomainSpreadArgs, pods []*v1.Pod, nodes []*v1.Node) *DomainSpread {
	tb.Helper()
	return newPlugin(tb, ctx, args, pods, cache.NewSnapshot(pods, nodes))
}

// newPlugin builds the plugin on snapshot, with its replica index fed by an informer over a fake
// clientset holding pods, and waits for the index to have them.
func newPlugin(tb testing.TB, ctx context.Context, args *config.DomainSpreadArgs, pods []*v1.Pod, snapshot *cache.Snapshot) *DomainSpread {
	tb.Helper()
	objects := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objects = append(objects, p)
	}
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		tb.Fatal(err)
	}
	for _, ni := range nodeInfos {
		objects = append(objects, ni.Node())
	}
	informerFactory := informers.NewSharedInformerFactory(fake.NewClientset(objects...), 0)
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithSnapshotSharedLister(snapshot), frameworkruntime.WithInformerFactory(informerFactory))
	if err != nil {
		tb.Fatal(err)
	}
	pl, err := New(ctx, args, fh)
	if err != nil {
		tb.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	ds := pl.(*DomainSpread)
	if err := ds.replicas.waitForSync(ctx); err != nil {
		tb.Fatal(err)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), ds.nodeReg.HasSynced) {
		tb.Fatal("node handler did not sync")
	}
	return ds
}

// node builds a node in fault domain fd and update domain ud (empty: no label), labelled as
// cloud-provider-azure labels VMs outside zones: the fault domain in the zone label.
func node(name, fd, ud string) *v1.Node {
	n := st.MakeNode().Name(name).Label(v1.LabelHostname, name)
	if fd != "" {
		n.Label(zoneKey, fd)
	}
	if ud != "" {
		n.Label(udKey, ud)
	}
	return n.Obj()
}

// replica builds a pod of the ReplicaSet with uid rs, on nodeName ("" = pending).
func replica(name, rs, nodeName string) *v1.Pod {
	return st.MakePod().Namespace("default").Name(name).UID(name).
		OwnerReference(rs, v1.SchemeGroupVersion.WithKind("ReplicaSet")).Node(nodeName).Obj()
}

func withOwnerUID(p *v1.Pod, uid string) *v1.Pod {
	p.OwnerReferences[0].UID = types.UID(uid)
	return p
}

func rsPod(name, rs, nodeName string) *v1.Pod { return withOwnerUID(replica(name, rs, nodeName), rs) }

// grid builds fds x uds nodes, one per cell, named fd<f>-ud<u>.
func grid(fds, uds int) []*v1.Node {
	var nodes []*v1.Node
	for f := 0; f < fds; f++ {
		for u := 0; u < uds; u++ {
			nodes = append(nodes, node(fmt.Sprintf("fd%d-ud%d", f, u), fmt.Sprint(f), fmt.Sprint(u)))
		}
	}
	return nodes
}

func TestNewValidatesArgs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	fh, _ := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nil)))
	args := defaultArgs()
	args.Mode = "Sometimes"
	if _, err := New(ctx, args, fh); err == nil {
		t.Error("New accepted mode Sometimes")
	}
}
