package domainlabeler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// What the domain mode does on a node that is not on Azure (--on-not-azure).
const (
	OnNotAzureExit = "exit"
	OnNotAzureIdle = "idle"
	OnNotAzureFail = "fail"
)

// Options configure `pool-labeler domain`: DomainOptions and what the command adds to them.
// The mode is no manager: Run is what SetupWithManager is to the other modes.
type Options struct {
	DomainOptions
	// OnNotAzure: OnNotAzureExit (0), OnNotAzureIdle (probe again every Reprobe), OnNotAzureFail.
	OnNotAzure string
	// Interval is how often the labels are checked and restored (--recheck-interval).
	Interval time.Duration
	// Reprobe is --reprobe-interval; Attempts the metadata attempts before giving up.
	Reprobe  time.Duration
	Attempts int
}

// Complete validates o and fills the backoffs; each error names the flag at fault.
func (o *Options) Complete() error {
	o.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: o.Attempts, Cap: time.Minute}
	o.PatchBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: time.Minute}
	var errs []error
	switch o.OnNotAzure {
	case OnNotAzureExit, OnNotAzureFail:
	case OnNotAzureIdle:
		// Idle, not asleep: a node whose endpoint was not up at boot is labelled once it is.
		o.ReprobeInterval = o.Reprobe
	default:
		errs = append(errs, fmt.Errorf("--on-not-azure: %q is not one of exit, idle, fail", o.OnNotAzure))
	}
	if o.Reprobe <= 0 {
		errs = append(errs, fmt.Errorf("--reprobe-interval must be positive, got %v", o.Reprobe))
	}
	return errors.Join(append(errs, ValidateDomainOptions(o.DomainOptions, o.Interval))...)
}

// Run labels the node until ctx ends, or returns as OnNotAzure says on a node that is not on
// Azure; o must be Completed.
func (o Options) Run(ctx context.Context, cs kubernetes.Interface) error {
	err := RunDomainMode(ctx, cs, o.DomainOptions, o.Interval)
	if errors.Is(err, ErrMetadataUnreachable) {
		// An Azure VM whose endpoint this pod cannot reach is a failure in every mode (the
		// node is never labelled), not "not Azure"; idle returns only when ctx ended.
		if o.OnNotAzure == OnNotAzureIdle && ctx.Err() != nil {
			return nil
		}
		return err
	}
	if errors.Is(err, ErrNotAzure) {
		klog.FromContext(ctx).Info("This node is not on Azure: no domains to label", "reason", err.Error(), "onNotAzure", o.OnNotAzure)
		switch o.OnNotAzure {
		case OnNotAzureExit:
			return nil
		case OnNotAzureIdle:
			// Only when ctx ended: idle mode probes again every --reprobe-interval.
			return nil
		}
	}
	return err
}
