package labeler

import (
	"strings"
	"testing"
	"time"
)

func TestValidateLeaderElection(t *testing.T) {
	tests := []struct {
		name                string
		lease, renew, retry time.Duration
		wantErrContaining   string
	}{
		{name: "defaults", lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second},
		{name: "fast takeover", lease: 4 * time.Second, renew: 3 * time.Second, retry: 500 * time.Millisecond},
		{name: "zero retry", lease: 15 * time.Second, renew: 10 * time.Second, wantErrContaining: "--leader-elect-retry-period must be positive"},
		{name: "renew within retry jitter", lease: 15 * time.Second, renew: 2 * time.Second, retry: 2 * time.Second, wantErrContaining: "--leader-elect-renew-deadline"},
		{name: "lease not longer than renew", lease: 10 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second, wantErrContaining: "--leader-elect-lease-duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateLeaderElection(tt.lease, tt.renew, tt.retry)
			switch {
			case tt.wantErrContaining == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErrContaining != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrContaining)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErrContaining)
			}
		})
	}
}
