// Package util holds what the integration and end-to-end tests share: a real control plane,
// object builders and waits.
package util

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/testutil"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/kubernetes/test/integration/framework"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// SchedulerName is the scheduler name of the shipped profile.
const SchedulerName = "pool-scheduler"

// ControlPlaneFlags are given to every control plane of the test process: feature gates are
// process-wide and stay set, so every apiserver serves the MutatingAdmissionPolicy API (beta,
// off by default in 1.34) that the admission tests enable.
var ControlPlaneFlags = []string{
	"--feature-gates=MutatingAdmissionPolicy=true",
	"--runtime-config=admissionregistration.k8s.io/v1beta1=true",
}

// StartControlPlane starts kube-apiserver (etcd from framework.EtcdMain) with the CRDs installed
// and ControlPlaneFlags.
func StartControlPlane(t testing.TB, flags ...string) *controlplane.ControlPlane {
	t.Helper()
	return StartControlPlaneWithGates(t, append(append([]string{}, ControlPlaneFlags...), flags...)...)
}

// StartControlPlaneWithGates is StartControlPlane without ControlPlaneFlags, for processes whose
// other apiservers (scheduler_perf's) do not serve the MutatingAdmissionPolicy API: with its
// gate on they would wait for its informers forever.
func StartControlPlaneWithGates(t testing.TB, flags ...string) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start(t, framework.SharedEtcd(), controlplane.Options{Flags: flags})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	return cp
}

// CreateNamespace creates a namespace with a unique name.
func CreateNamespace(ctx context.Context, t testing.TB, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// Node builds a schedulable node with room for pods; labels are added to kubernetes.io/hostname.
func Node(name string, labels map[string]string) *st.NodeWrapper {
	n := st.MakeNode().Name(name).Label(v1.LabelHostname, name).
		Capacity(map[v1.ResourceName]string{v1.ResourcePods: "110", v1.ResourceCPU: "8", v1.ResourceMemory: "32Gi"})
	for k, v := range labels {
		n.Label(k, v)
	}
	return n
}

// CreateNode creates node.
func CreateNode(ctx context.Context, t testing.TB, cs kubernetes.Interface, node *v1.Node) *v1.Node {
	t.Helper()
	got, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", node.Name, err)
	}
	return got
}

// Pod builds a pause pod for pool-scheduler.
func Pod(namespace, name string) *st.PodWrapper {
	return st.MakePod().Namespace(namespace).Name(name).SchedulerName(SchedulerName).Container("registry.k8s.io/pause:3.10")
}

// CreatePod creates pod.
func CreatePod(ctx context.Context, t testing.TB, cs kubernetes.Interface, pod *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return got
}

// WaitForPodBound waits until the pod has a node and returns the node's name.
func WaitForPodBound(ctx context.Context, t testing.TB, cs kubernetes.Interface, namespace, name string, timeout time.Duration) string {
	t.Helper()
	var node string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not bound within %v: %s", namespace, name, timeout, PodScheduledMessage(ctx, cs, namespace, name))
	}
	return node
}

// WaitForPodUnschedulable waits until the pod's PodScheduled condition is False with a message
// containing reason, and returns the message.
func WaitForPodUnschedulable(ctx context.Context, t *testing.T, cs kubernetes.Interface, namespace, name, reason string, timeout time.Duration) string {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod was bound to %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, reason) {
				msg = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: want unschedulable with %q: %v (condition: %s)", namespace, name, reason, err, PodScheduledMessage(ctx, cs, namespace, name))
	}
	return msg
}

// PodScheduledMessage describes the pod's PodScheduled condition, for failure messages.
func PodScheduledMessage(ctx context.Context, cs kubernetes.Interface, namespace, name string) string {
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no PodScheduled condition"
}

// PatchNode applies a JSON merge patch to a node.
func PatchNode(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, patch string) {
	t.Helper()
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching node %s with %s: %v", name, patch, err)
	}
}

// LabelSet builds a NodePoolLabelSet.
func LabelSet(namespace, name string, labels map[string]string) *labelsv1alpha1.NodePoolLabelSet {
	values := make(map[string]labelsv1alpha1.LabelValue, len(labels))
	for k, v := range labels {
		values[k] = labelsv1alpha1.LabelValue(v)
	}
	return &labelsv1alpha1.NodePoolLabelSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: labelsv1alpha1.SchemeGroupVersion.String(), Kind: "NodePoolLabelSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       labelsv1alpha1.NodePoolLabelSetSpec{Labels: values},
	}
}

// ApplyLabelSet creates or replaces the spec of a NodePoolLabelSet, returning the apiserver's error.
func ApplyLabelSet(ctx context.Context, cp *controlplane.ControlPlane, set *labelsv1alpha1.NodePoolLabelSet) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(set)
	if err != nil {
		return err
	}
	client := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(set.Namespace)
	// The labeler writes the set's status meanwhile: retry an update that lost that race.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
		existing, err := client.Get(ctx, set.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, u, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		u.SetResourceVersion(existing.GetResourceVersion())
		_, err = client.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
}

// MustApplyLabelSet is ApplyLabelSet that fails the test on error.
func MustApplyLabelSet(ctx context.Context, t testing.TB, cp *controlplane.ControlPlane, set *labelsv1alpha1.NodePoolLabelSet) {
	t.Helper()
	if err := ApplyLabelSet(ctx, cp, set); err != nil {
		t.Fatalf("applying NodePoolLabelSet %s/%s: %v", set.Namespace, set.Name, err)
	}
}

// DeleteLabelSet deletes a NodePoolLabelSet.
func DeleteLabelSet(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, namespace, name string) {
	t.Helper()
	if err := cp.Dynamic.Resource(labelsv1alpha1.Resource).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting NodePoolLabelSet %s/%s: %v", namespace, name, err)
	}
}

// WaitForPods polls the pods of a namespace until check reports done; check's error fails the
// test at once (for invariants that must never break while waiting).
func WaitForPods(ctx context.Context, t *testing.T, cs kubernetes.Interface, namespace string, timeout time.Duration, check func(pods []v1.Pod) (bool, error)) []v1.Pod {
	t.Helper()
	var last []v1.Pod
	var invariant error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		last = list.Items
		done, err := check(last)
		invariant = err
		return done, err
	})
	if invariant != nil {
		t.Fatal(invariant)
	}
	if err != nil {
		t.Fatalf("pods in %s did not reach the wanted state within %v", namespace, timeout)
	}
	return last
}

// WaitAllBound waits until the namespace has n pods, all bound, and names the pending ones if not.
func WaitAllBound(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, n int, timeout time.Duration) []v1.Pod {
	t.Helper()
	start := time.Now()
	var last []v1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		last = list.Items
		if len(last) != n {
			return false, nil
		}
		for _, p := range last {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var pending []string
		for _, p := range last {
			if p.Spec.NodeName == "" {
				pending = append(pending, p.Name+" ("+PodScheduledMessage(ctx, cs, ns, p.Name)+")")
			}
		}
		sort.Strings(pending)
		if len(pending) > 10 {
			pending = append(pending[:10], "...")
		}
		t.Fatalf("%d pods exist, want %d all bound within %v; %d pending: %v", len(last), n, timeout, len(pending), pending)
	}
	t.Logf("%d pods bound after %v", n, time.Since(start).Round(time.Millisecond))
	return last
}

// UnschedulableWith reports whether the pod's PodScheduled condition is False with reason in its message.
func UnschedulableWith(p *v1.Pod, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && strings.Contains(c.Message, reason) {
			return true
		}
	}
	return false
}

// InstallConfigMap creates a ConfigMap (namespace must exist), as an install puts the
// scheduler's configuration in one.
func InstallConfigMap(ctx context.Context, t testing.TB, cs kubernetes.Interface, namespace, name string, data map[string]string) {
	t.Helper()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	if _, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ConfigMap %s/%s: %v", namespace, name, err)
	}
}

// APIServerMetrics reads the API server's own metrics (its /metrics), parsed with
// component-base's parser: the same on both release lines (prometheus/common's zero TextParser
// panics from v0.67, the 1.36 line's).
func APIServerMetrics(ctx context.Context, t testing.TB, cs kubernetes.Interface) testutil.Metrics {
	t.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	metrics := testutil.NewMetrics()
	if err := testutil.ParseMetrics(string(raw), &metrics); err != nil {
		t.Fatalf("parsing the API server's metrics: %v", err)
	}
	return metrics
}

// Parallel runs f for 0..n-1, 16 at a time (a scale-up's nodes, a workload's pods, as they come:
// concurrently), with client-go's workqueue.ParallelizeUntil, and fails t with the first error.
func Parallel(ctx context.Context, t testing.TB, n int, f func(i int) error) {
	t.Helper()
	var mu sync.Mutex
	var first error
	workqueue.ParallelizeUntil(ctx, 16, n, func(i int) {
		if err := f(i); err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	if first != nil {
		t.Fatal(first)
	}
}
