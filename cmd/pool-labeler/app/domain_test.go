package app

import (
	"strings"
	"testing"

	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

// The domain command checks its flags before it connects anywhere; each error names the flag.
func TestDomainCommandValidatesFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no node name", args: []string{"--node-name="}, want: "--node-name"},
		{name: "relative endpoint", args: []string{"--imds-endpoint=/metadata"}, want: "--imds-endpoint"},
		{name: "endpoint scheme", args: []string{"--imds-endpoint=file:///etc/passwd"}, want: "--imds-endpoint"},
		{name: "endpoint unparsable", args: []string{"--imds-endpoint=http://[::1"}, want: "--imds-endpoint"},
		{name: "update-domain key", args: []string{"--update-domain-key=not a key"}, want: "--update-domain-key"},
		{name: "fault-domain key", args: []string{"--fault-domain-key=-x"}, want: "--fault-domain-key"},
		// A key outside topology.pool-scheduler.io/ is not one NodePoolLabelSets are kept off
		// (#34): a set naming it would block its pool.
		{name: "update-domain key outside the domain prefix", args: []string{"--update-domain-key=example.com/ud"}, want: "--update-domain-key"},
		{name: "fault-domain key outside the domain prefix", args: []string{"--fault-domain-key=example.com/fd"}, want: "--fault-domain-key"},
		{name: "reserved update-domain key", args: []string{"--update-domain-key=topology.kubernetes.io/zone"}, want: "--update-domain-key"},
		{name: "same keys", args: []string{"--fault-domain-key=" + configv1.UpdateDomainLabelKey}, want: "--fault-domain-key"},
		{name: "zero timeout", args: []string{"--request-timeout=0"}, want: "--request-timeout"},
		{name: "no attempts", args: []string{"--attempts=0"}, want: "--attempts"},
		{name: "zero recheck interval", args: []string{"--recheck-interval=0"}, want: "--recheck-interval"},
		{name: "zero reprobe interval", args: []string{"--reprobe-interval=0"}, want: "--reprobe-interval"},
		{name: "unknown on-not-azure", args: []string{"--on-not-azure=sleep"}, want: "--on-not-azure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			// A kubeconfig that does not exist: reaching it would fail with another error.
			cmd.SetArgs(append([]string{"domain", "--kubeconfig=/nonexistent", "--node-name=n"}, tt.args...))
			cmd.SetOut(new(strings.Builder))
			cmd.SetErr(new(strings.Builder))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "kubeconfig") {
				t.Errorf("error = %v, want one naming %s", err, tt.want)
			}
		})
	}
}
