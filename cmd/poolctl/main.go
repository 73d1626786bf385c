// Command poolctl simulates scenarios under the default scheduler and pool-scheduler side by
// side, and audits live clusters with the same measurements. Installed (or linked) as
// kubectl-pool it is the kubectl plugin `kubectl pool`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pool-scheduler/pool-scheduler/pkg/poolctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := poolctl.Run(ctx, os.Args[0], os.Args[1:])
	stop()
	os.Exit(code)
}
