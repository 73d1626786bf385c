package spreadkeeper

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pool-scheduler/pool-scheduler/pkg/profile"
)

// TestOptionsComplete: the spread mode's options take the profile's name and DomainSpread's
// args from the configuration, and each error names the flag at fault.
func TestOptionsComplete(t *testing.T) {
	const config = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: pool-scheduler\n"
	p, err := profile.Load("config.yaml", []byte(config), profile.DefaultSchedulerName)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "deletion cost", opts: Options{Profile: p, DeletionCost: true}},
		{name: "no configuration", opts: Options{DeletionCost: true}, wantErr: "--config: required"},
		{name: "nothing to do", opts: Options{Profile: p}, wantErr: "--deletion-cost=false, --rebalance=false and --budget-floor=false: nothing to do"},
		{name: "switch without namespace", opts: Options{Profile: p, DeletionCost: true, HandoffSwitch: types.NamespacedName{Name: "pool-scheduler-handoff"}},
			wantErr: "--handoff-switch-namespace: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Keeper.QPS, o.Keeper.Burst, o.Keeper.Workers = 20, 40, 2
			o.Keeper.Settle = 1
			err := o.Complete()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Keeper.SchedulerName != profile.DefaultSchedulerName || o.Keeper.Spread == nil || o.Keeper.Off {
				t.Errorf("completed keeper: schedulerName %q, spread args %v, off %v; want the profile's, DomainSpread's, on", o.Keeper.SchedulerName, o.Keeper.Spread, o.Keeper.Off)
			}
		})
	}
}
