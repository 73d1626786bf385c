package labeler

import (
	"flag"

	"k8s.io/klog/v2"
)

// goFlagSet exposes klog's flags (-v, --logging-format is not needed here).
func goFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
}
