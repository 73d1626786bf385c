// Package integration runs pool-scheduler's plugins in process against a real kube-apiserver and
// etcd (etcd from PATH, built by `make etcd` from go.mod's tool directive).
package integration

import (
	"testing"

	"k8s.io/kubernetes/test/integration/framework"
	"k8s.io/kubernetes/test/utils/ktesting"
)

func init() {
	// Scheduler decisions at -v=2; raise with -v=5 when debugging a failure.
	ktesting.SetDefaultVerbosity(2)
}

func TestMain(m *testing.M) {
	framework.EtcdMain(m.Run)
}
