// Command pool-scheduler is the stock kube-scheduler with pool-scheduler's plugins registered,
// alongside the scheduler-plugins project's, so one profile can combine ours, theirs and the
// in-tree ones. Run it as a second scheduler: pods opt in with spec.schedulerName.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/pool-scheduler/pool-scheduler/cmd/pool-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
