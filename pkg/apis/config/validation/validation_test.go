package validation

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
)

func validArgs() *config.NodePoolReadyArgs {
	return &config.NodePoolReadyArgs{
		PoolLabelKeys:     configv1.DefaultPoolLabelKeys,
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
				a.LabelSetNamespaces = []string{"pool-scheduler", "pipeline-system"}
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
		{
			name: "invalid namespace",
			modify: func(a *config.NodePoolReadyArgs) {
				a.LabelSetNamespaces = []string{"pool-scheduler", "Not_A_Namespace"}
			},
			wantFields: []string{"args.labelSetNamespaces[1]"},
		},
		{
			name: "duplicate namespace",
			modify: func(a *config.NodePoolReadyArgs) {
				a.LabelSetNamespaces = []string{"pipeline-system", "pipeline-system"}
			},
			wantFields: []string{"args.labelSetNamespaces[1]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validArgs()
			tt.modify(args)
			err := ValidateNodePoolReadyArgs(field.NewPath("args"), args)
			expectFieldErrors(t, err, tt.wantFields)
		})
	}
}

func validSystemArgs() *config.SystemPoolGuardArgs {
	return &config.SystemPoolGuardArgs{
		PoolLabelKeys:         configv1.DefaultPoolLabelKeys,
		SystemPools:           []string{"system"},
		SystemNamespaces:      []string{"kube-system"},
		SystemPriorityClasses: []string{"system-cluster-critical"},
		SystemTolerationKeys:  []string{"CriticalAddonsOnly"},
	}
}

func TestValidateSystemPoolGuardArgs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(*config.SystemPoolGuardArgs)
		wantFields []string
	}{
		{name: "defaults", modify: func(*config.SystemPoolGuardArgs) {}},
		{
			name: "selector only",
			modify: func(a *config.SystemPoolGuardArgs) {
				a.SystemPools = nil
				a.SystemNodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}
			},
		},
		{name: "empty pool name", modify: func(a *config.SystemPoolGuardArgs) { a.SystemPools = []string{"system", ""} }, wantFields: []string{"args.systemPools[1]"}},
		{name: "invalid pool name", modify: func(a *config.SystemPoolGuardArgs) { a.SystemPools = []string{"sys tem"} }, wantFields: []string{"args.systemPools[0]"}},
		{
			name: "bad selector",
			modify: func(a *config.SystemPoolGuardArgs) {
				a.SystemNodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sometimes"}}}
			},
			wantFields: []string{"args.systemNodeSelector"},
		},
		{
			name: "nothing names system nodes",
			modify: func(a *config.SystemPoolGuardArgs) {
				a.SystemPools = nil
				a.SystemNodeSelector = &metav1.LabelSelector{}
			},
			wantFields: []string{"args.systemPools"},
		},
		{name: "bad namespace", modify: func(a *config.SystemPoolGuardArgs) { a.SystemNamespaces = []string{"Kube_System"} }, wantFields: []string{"args.systemNamespaces[0]"}},
		{name: "bad priority class", modify: func(a *config.SystemPoolGuardArgs) { a.SystemPriorityClasses = []string{"Not Valid"} }, wantFields: []string{"args.systemPriorityClasses[0]"}},
		{name: "bad toleration key", modify: func(a *config.SystemPoolGuardArgs) { a.SystemTolerationKeys = []string{"a b"} }, wantFields: []string{"args.systemTolerationKeys[0]"}},
		{name: "bad pool key", modify: func(a *config.SystemPoolGuardArgs) { a.PoolLabelKeys = []string{"a b"} }, wantFields: []string{"args.poolLabelKeys[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := validSystemArgs()
			tt.modify(args)
			err := ValidateSystemPoolGuardArgs(field.NewPath("args"), args)
			expectFieldErrors(t, err, tt.wantFields)
		})
	}
}

func TestValidateDomainSpreadArgs(t *testing.T) {
	valid := func() *config.DomainSpreadArgs {
		return &config.DomainSpreadArgs{
			Dimensions: []config.SpreadDimension{
				{Name: "zone", LabelKeys: []string{"topology.kubernetes.io/zone"}},
				{Name: "update-domain", LabelKeys: []string{"topology.pool-scheduler.io/update-domain"}, Joint: true},
			},
			Mode: config.SpreadSoft, MaxSkew: 1,
		}
	}
	tests := []struct {
		name       string
		modify     func(*config.DomainSpreadArgs)
		wantFields []string
	}{
		{name: "valid", modify: func(*config.DomainSpreadArgs) {}},
		{name: "no dimensions", modify: func(a *config.DomainSpreadArgs) { a.Dimensions = nil }, wantFields: []string{"args.dimensions"}},
		{
			name: "too many dimensions",
			modify: func(a *config.DomainSpreadArgs) {
				for i := 0; i < 4; i++ {
					a.Dimensions = append(a.Dimensions, config.SpreadDimension{Name: fmt.Sprint("d", i), LabelKeys: []string{"k"}})
				}
			},
			wantFields: []string{"args.dimensions"},
		},
		{name: "missing name", modify: func(a *config.DomainSpreadArgs) { a.Dimensions[1].Name = "" }, wantFields: []string{"args.dimensions[1].name"}},
		{name: "duplicate name", modify: func(a *config.DomainSpreadArgs) { a.Dimensions[1].Name = "zone" }, wantFields: []string{"args.dimensions[1].name"}},
		{name: "no keys", modify: func(a *config.DomainSpreadArgs) { a.Dimensions[0].LabelKeys = nil }, wantFields: []string{"args.dimensions[0].labelKeys"}},
		{name: "bad key", modify: func(a *config.DomainSpreadArgs) { a.Dimensions[0].LabelKeys = []string{"a b"} }, wantFields: []string{"args.dimensions[0].labelKeys[0]"}},
		{name: "first dimension joint", modify: func(a *config.DomainSpreadArgs) { a.Dimensions[0].Joint = true }, wantFields: []string{"args.dimensions[0].joint"}},
		{name: "bad mode", modify: func(a *config.DomainSpreadArgs) { a.Mode = "Sometimes" }, wantFields: []string{"args.mode"}},
		{name: "maxSkew 0", modify: func(a *config.DomainSpreadArgs) { a.MaxSkew = 0 }, wantFields: []string{"args.maxSkew"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := valid()
			tt.modify(args)
			err := ValidateDomainSpreadArgs(field.NewPath("args"), args)
			expectFieldErrors(t, err, tt.wantFields)
		})
	}
}

// expectFieldErrors checks that err names every field in want (path followed by a colon), or
// that there is no error when want is empty.
func expectFieldErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one naming %v", want)
	}
	for _, f := range want {
		if !strings.Contains(err.Error(), f+":") {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
}
