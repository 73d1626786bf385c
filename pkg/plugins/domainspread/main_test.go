package domainspread

import (
	"os"
	"testing"

	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	// The framework's parallelizer reports into the scheduler's metrics.
	schedmetrics.Register()
	os.Exit(m.Run())
}
