package app

import (
	"context"
	"fmt"
	"strings"
	"testing"

	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// TestCheckVersion: at start the scheduler reports whether kube-apiserver's minor is one its
// line serves (pool_scheduler_apiserver_supported).
func TestCheckVersion(t *testing.T) {
	major, minor, _ := strings.Cut(version.KubernetesLine(), ".")
	var m int
	if _, err := fmt.Sscan(minor, &m); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		minor int
		want  float64
	}{{m, 1}, {m + 1, 1}, {m + 2, 0}, {m - 1, 0}} {
		t.Run(fmt.Sprint(tt.minor), func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}, FakedServerVersion: &k8sversion.Info{Major: major, Minor: fmt.Sprint(tt.minor)}}
			checkVersion(context.Background(), d)
			got, err := testutil.GetGaugeMetricValue(apiserverSupported)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("kube-apiserver %s.%d: pool_scheduler_apiserver_supported = %v, want %v", major, tt.minor, got, tt.want)
			}
		})
	}
}
