package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	"github.com/pool-scheduler/pool-scheduler/pkg/pool"
)

func validArgs() *config.NodePoolReadyArgs {
	return &config.NodePoolReadyArgs{
		PoolLabelKeys:     pool.DefaultLabelKeys,
		UnknownPoolPolicy: config.UnknownPoolAuto,
	}
}

func TestValidateNodePoolReadyArgs(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*config.NodePoolReadyArgs)
		// wantFields are the field paths the error must name; none means valid.
		wantFields []string
	}{
		{name: "defaults are valid", modify: func(*config.NodePoolReadyArgs) {}},
		{
			name: "all policies are valid",
			modify: func(a *config.NodePoolReadyArgs) {
				a.UnknownPoolPolicy = config.UnknownPoolAllow
				a.RequiredLabelKeys = []string{"topology.pool-scheduler.io/update-domain"}
				a.PoolRequiredLabelKeys = map[string][]string{"gpu": {"nvidia.com/gpu.product"}}
				a.LabelSetNamespace = "pool-scheduler"
			},
		},
		{name: "no pool keys", modify: func(a *config.NodePoolReadyArgs) { a.PoolLabelKeys = nil }, wantFields: []string{"args.poolLabelKeys"}},
		{name: "invalid pool key", modify: func(a *config.NodePoolReadyArgs) { a.PoolLabelKeys = []string{"a", "bad key"} }, wantFields: []string{"args.poolLabelKeys[1]"}},
		{name: "duplicate pool key", modify: func(a *config.NodePoolReadyArgs) { a.PoolLabelKeys = []string{"a", "a"} }, wantFields: []string{"args.poolLabelKeys[1]"}},
		{name: "invalid required key", modify: func(a *config.NodePoolReadyArgs) { a.RequiredLabelKeys = []string{"/x"} }, wantFields: []string{"args.requiredLabelKeys[0]"}},
		{
			name:       "invalid pool name in poolRequiredLabelKeys",
			modify:     func(a *config.NodePoolReadyArgs) { a.PoolRequiredLabelKeys = map[string][]string{"": {"a"}} },
			wantFields: []string{"args.poolRequiredLabelKeys[]"},
		},
		{
			name:       "invalid key in poolRequiredLabelKeys",
			modify:     func(a *config.NodePoolReadyArgs) { a.PoolRequiredLabelKeys = map[string][]string{"gpu": {"a", "b c"}} },
			wantFields: []string{"args.poolRequiredLabelKeys[gpu][1]"},
		},
		{name: "unknown policy", modify: func(a *config.NodePoolReadyArgs) { a.UnknownPoolPolicy = "Sometimes" }, wantFields: []string{"args.unknownPoolPolicy"}},
		{name: "empty policy", modify: func(a *config.NodePoolReadyArgs) { a.UnknownPoolPolicy = "" }, wantFields: []string{"args.unknownPoolPolicy"}},
		{name: "invalid namespace", modify: func(a *config.NodePoolReadyArgs) { a.LabelSetNamespace = "Not_A_Namespace" }, wantFields: []string{"args.labelSetNamespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validArgs()
			tt.modify(args)
			err := ValidateNodePoolReadyArgs(field.NewPath("args"), args)
			if len(tt.wantFields) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tt.wantFields)
			}
			for _, f := range tt.wantFields {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
}
