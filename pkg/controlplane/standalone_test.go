package controlplane

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	labelsv1alpha1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/labels/v1alpha1"
)

func TestStartStandalone(t *testing.T) {
	// Everything StartStandalone and the apiserver put in the temporary directory lands here.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	klogBefore := klogFlags()

	start := time.Now()
	cp, err := StartStandalone(context.Background(), io.Discard, Options{})
	if err != nil {
		t.Fatalf("StartStandalone: %v", err)
	}
	t.Logf("StartStandalone ready after %s", time.Since(start).Round(time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cp.Stop()
		}
	})

	used, err := filepath.Glob(filepath.Join(tmp, "poolctl-controlplane-*"))
	if err != nil || len(used) != 1 {
		t.Fatalf("want one poolctl-controlplane-* directory in %s, got %v (%v)", tmp, used, err)
	}
	if _, err := os.Stat(filepath.Join(used[0], "etcd")); err != nil {
		t.Errorf("etcd data directory: %v", err)
	}
	if diff := cmp.Diff(klogBefore, klogFlags()); diff == "" {
		t.Errorf("klog settings unchanged while the control plane runs, want them redirected")
	}

	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"pool": "a"}}}
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	got, err := cp.Client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node: %v", err)
	}
	if diff := cmp.Diff(node.Labels, got.Labels); diff != "" {
		t.Errorf("node labels (-want +got):\n%s", diff)
	}

	sets, err := cp.Dynamic.Resource(labelsv1alpha1.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing %s: %v", labelsv1alpha1.Resource, err)
	}
	if len(sets.Items) != 0 {
		t.Errorf("want no NodePoolLabelSets, got %d", len(sets.Items))
	}

	cp.Stop()
	stopped = true
	cp.Stop() // A second Stop is a no-op.

	if _, err := os.Stat(used[0]); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s still there after Stop (stat: %v)", used[0], err)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if len(names) != 0 {
		t.Errorf("left in the temporary directory after Stop: %v", names)
	}
	// Logging goes back to stderr (klog's locked setter). The flags the redirect set once per
	// process stay: with logtostderr they do not change where a line goes, and klog's
	// State.Restore would race with the stopped apiserver's last log lines.
	if after := klogFlags(); after["logtostderr"] != klogBefore["logtostderr"] {
		t.Errorf("klog logtostderr %s after Stop, want %s as before", after["logtostderr"], klogBefore["logtostderr"])
	}
}

func TestStartStandaloneCancelled(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if cp, err := StartStandalone(ctx, io.Discard, Options{}); err == nil {
		cp.Stop()
		t.Fatal("StartStandalone with a cancelled context succeeded")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}

func TestStandaloneTB(t *testing.T) {
	var out strings.Builder
	tb := &standaloneTB{name: "tb", out: &syncWriter{w: &out}}
	var order []int
	tb.Cleanup(func() { order = append(order, 1) })
	tb.Cleanup(func() {
		order = append(order, 2)
		// A cleanup registered by a cleanup runs too, before the older ones.
		tb.Cleanup(func() { order = append(order, 3) })
	})
	tb.Logf("hello %d", 42)
	tb.Logf("line\n")

	tb.runCleanups()
	if diff := cmp.Diff([]int{2, 3, 1}, order); diff != "" {
		t.Errorf("cleanup order (-want +got):\n%s", diff)
	}
	tb.runCleanups()
	if len(order) != 3 {
		t.Errorf("cleanups ran again: %v", order)
	}
	if diff := cmp.Diff("tb: hello 42\ntb: line\n", out.String()); diff != "" {
		t.Errorf("log output (-want +got):\n%s", diff)
	}

	quiet := &standaloneTB{name: "tb", out: &syncWriter{w: io.Discard}}
	quiet.Logf("dropped") // must not fail on a discarding writer
}

// klogFlags returns the values of klog's flags.
func klogFlags() map[string]string {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	values := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { values[f.Name] = f.Value.String() })
	return values
}
