// Command pool-labeler runs pool-scheduler's controllers, one mode per subcommand: it applies
// NodePoolLabelSets to nodes (controller), labels a node with its Azure platform fault and update
// domain (domain), serves the mutating admission webhook (webhook), judges and repairs the
// hand-off (handoff), hands pods back before removal (handback), keeps the spread through
// scale-downs (spread) and keeps the certificates (certs).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/pool-scheduler/pool-scheduler/cmd/pool-labeler/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
