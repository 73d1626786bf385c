// Command pool-labeler applies NodePoolLabelSets to nodes (controller mode), labels a node with
// its Azure platform fault and update domain (domain mode) and serves the mutating admission
// webhook (webhook mode).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/pool-scheduler/pool-scheduler/cmd/pool-labeler/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
