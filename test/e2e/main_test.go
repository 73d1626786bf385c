// Package e2e runs the built bin/pool-scheduler as a child process, a drop-in second scheduler,
// against a real kube-apiserver and etcd, with the configuration shipped in manifests/scheduler.
package e2e

import (
	"testing"

	"k8s.io/kubernetes/test/integration/framework"
	"k8s.io/kubernetes/test/utils/ktesting"
)

func init() {
	ktesting.SetDefaultVerbosity(2)
}

func TestMain(m *testing.M) {
	framework.EtcdMain(m.Run)
}
