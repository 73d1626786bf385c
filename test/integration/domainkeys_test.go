package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubernetes/test/utils/ktesting"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/domainlabeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestDomainKeysAreNotObeyed: the domain labeler's keys (topology.pool-scheduler.io/) belong to
// it. A NodePoolLabelSet naming one used to start an endless relabel: the controller put its
// value back at once, the domain labeler rewrote its own every recheck, and DomainSpread's
// domains flipped with the label. The shipped CRD refuses such a set, so the flip-flop cannot
// start; a set stored before that rule (here through a CRD without validation, as an older CRD
// let it in) is reported (its status, the scheduler's problems metric) and not obeyed: with the
// controller, the domain labeler (rechecking every 100 ms) and the scheduler all running, the
// node's update-domain label only ever holds the domain labeler's value, the key leaves the
// node's managed-labels annotation, the set's other labels are applied and the node is used.
func TestDomainKeysAreNotObeyed(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	cs := cp.Client
	setNS := util.CreateNamespace(tCtx, t, cs, "domain-keys")
	podNS := util.CreateNamespace(tCtx, t, cs, "pods")

	flipFlop := map[string]string{"example.com/tier": "gold", configv1.UpdateDomainLabelKey: "9"}
	t.Run("the shipped CRD refuses the set", func(t *testing.T) {
		err := util.ApplyLabelSet(tCtx, cp, util.LabelSet(setNS, "spot", flipFlop))
		if err == nil || !strings.Contains(err.Error(), "written on each node by pool-labeler's domain mode") {
			t.Fatalf("creating a set naming %s: %v, want refused by the CRD's rule", configv1.UpdateDomainLabelKey, err)
		}
	})

	installLooseCRD(tCtx, t, cp)
	labels := map[string]any{}
	for k, v := range flipFlop {
		labels[k] = v
	}
	if _, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(setNS).Create(tCtx, rawLabelSet(setNS, "spot", map[string]any{"labels": labels}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("storing the set through the loose CRD: %v", err)
	}
	// A node from the flip-flop era: the controller recorded the key as its own.
	node := util.Node("spot-0", map[string]string{poolKey: "spot", configv1.UpdateDomainLabelKey: "3"}).Obj()
	node.Annotations = map[string]string{pool.ManagedLabelsAnnotation: `["example.com/tier","` + configv1.UpdateDomainLabelKey + `"]`}
	node = util.CreateNode(tCtx, t, cs, node)

	// Every value the label takes from here on.
	w, err := cs.CoreV1().Nodes().Watch(tCtx, metav1.ListOptions{FieldSelector: "metadata.name=spot-0", ResourceVersion: node.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*v1.Node); ok && ev.Type == watch.Modified {
				v, present := n.Labels[configv1.UpdateDomainLabelKey]
				if !present {
					v = "<removed>"
				}
				mu.Lock()
				seen = append(seen, v)
				mu.Unlock()
			}
		}
	}()

	profile := util.LoadShippedConfig(t).Profiles[0]
	util.StartScheduler(t, cp, profile)
	util.StartLabeler(t, cp, labeler.Options{})
	srv, _ := imds(t, compute(1, 3))
	domainCtx, stopDomain := context.WithCancel(tCtx)
	domainDone := make(chan struct{})
	go func() {
		defer close(domainDone)
		_ = domainlabeler.RunDomainMode(domainCtx, cs, domainlabeler.DomainOptions{
			NodeName: "spot-0", Endpoint: srv.URL, UpdateDomainKey: configv1.UpdateDomainLabelKey, FaultDomainKey: configv1.FaultDomainLabelKey,
			RequestTimeout: time.Second, Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2},
		}, 100*time.Millisecond)
	}()
	t.Cleanup(func() { stopDomain(); <-domainDone })

	util.CreatePod(tCtx, t, cs, util.Pod(podNS, "pinned").NodeSelector(map[string]string{v1.LabelHostname: "spot-0"}).Obj())
	util.WaitForPodBound(tCtx, t, cs, podNS, "pinned", bindTimeout)

	set := waitLabelSetStatus(t, tCtx, cp, setNS, "spot", func(s labelsv1alpha1.NodePoolLabelSetStatus) bool {
		return s.State == labelsv1alpha1.SyncStateError
	})
	if !strings.Contains(set.Status.Message, configv1.UpdateDomainLabelKey) || !strings.Contains(set.Status.Message, "pool-labeler's domain mode") {
		t.Errorf("status message %q does not report the domain key", set.Status.Message)
	}
	if v, ok := gaugeValue(t, "pool_scheduler_nodepoolready_labelset_problems"); !ok || v < 1 {
		t.Errorf("pool_scheduler_nodepoolready_labelset_problems = %v (registered %v), want >= 1", v, ok)
	}
	var n *v1.Node
	err = wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, labelerTimeout, true, func(ctx context.Context) (bool, error) {
		n, err = cs.CoreV1().Nodes().Get(ctx, "spot-0", metav1.GetOptions{})
		return err == nil && n.Annotations[pool.ManagedLabelsAnnotation] == `["example.com/tier"]`, nil
	})
	if err != nil {
		t.Fatalf("the managed-labels annotation still names the domain key: %v", n.GetAnnotations())
	}
	if n.Labels["example.com/tier"] != "gold" {
		t.Errorf("the set's other label was not applied: %v", n.Labels)
	}
	// The domain labeler rechecks its label (and would rewrite it) several times more.
	after := domainLabelings(t)
	if err := wait.PollUntilContextTimeout(tCtx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return domainLabelings(t) >= after+5, nil
	}); err != nil {
		t.Fatalf("the domain labeler stopped rechecking its node: %v rounds", domainLabelings(t))
	}
	stopDomain()
	<-domainDone
	if n, err = cs.CoreV1().Nodes().Get(tCtx, "spot-0", metav1.GetOptions{}); err != nil || n.Labels[configv1.UpdateDomainLabelKey] != "3" {
		t.Errorf("update-domain label %q (%v), want the domain labeler's 3", n.GetLabels()[configv1.UpdateDomainLabelKey], err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range seen {
		if v != "3" {
			t.Errorf("the node's update-domain label took the values %q, want only the domain labeler's 3 (the controller wrote or removed it)", seen)
			break
		}
	}
}

// domainLabelings is the number of the domain mode's labelling rounds that read the node
// (pool_labeler_domain_labelings_total, results labelled and unchanged).
func domainLabelings(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range families {
		if mf.GetName() != "pool_labeler_domain_labelings_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && (l.GetValue() == "labelled" || l.GetValue() == "unchanged") {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
