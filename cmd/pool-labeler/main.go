// Command pool-labeler applies NodePoolLabelSets to nodes (controller mode) and labels a node
// with its Azure platform fault and update domain (domain mode).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/pool-scheduler/pool-scheduler/pkg/labeler"
)

func main() {
	os.Exit(cli.Run(labeler.NewCommand()))
}
