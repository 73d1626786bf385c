package plugins_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	configv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/pool-scheduler/pool-scheduler/internal/compat/framework"
	shipped "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	argsconfig "github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	_ "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/scheme"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/domainspread"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolaffinity"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/nodepoolready"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins/systempoolguard"
)

// loadConfig is what kube-scheduler's options.LoadConfigFromFile does with the file's bytes
// (cmd/kube-scheduler/app/options/configfile.go): kube-scheduler's strict, defaulting decoder,
// into which pkg/apis/config/scheme registers our args.
func loadConfig(data []byte) (*config.KubeSchedulerConfiguration, error) {
	obj, gvk, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("couldn't decode as KubeSchedulerConfiguration, got %s", gvk)
	}
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	return cfg, nil
}

// encodeConfig is what kube-scheduler does for --write-config-to and its startup log.
func encodeConfig(t *testing.T, cfg *config.KubeSchedulerConfiguration) []byte {
	info, ok := runtime.SerializerInfoForMediaType(kubeschedulerscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		t.Fatal("no YAML serializer")
	}
	var buf bytes.Buffer
	if err := kubeschedulerscheme.Codecs.EncoderForVersion(info.Serializer, configv1.SchemeGroupVersion).Encode(cfg, &buf); err != nil {
		t.Fatalf("encoding a configuration that decoded: %v", err)
	}
	return buf.Bytes()
}

const argsHeader = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: pool-scheduler\n  pluginConfig:\n"

// argsSeeds are configurations for the fuzzer to start from: every arg of every plugin, valid
// and invalid values, wrong types, and YAML features (anchors, flow style, JSON).
var argsSeeds = []string{
	argsHeader + "  - name: NodePoolReady\n    args: {}\n",
	argsHeader + "  - name: NodePoolReady\n    args:\n      poolLabelKeys: [example.com/pool, agentpool]\n      requiredLabelKeys: [topology.pool-scheduler.io/update-domain]\n      poolRequiredLabelKeys:\n        gpu: [nvidia.com/gpu.product]\n      unknownPoolPolicy: Reject\n      labelSetNamespace: pool-scheduler\n      ignoreDaemonSetPods: false\n",
	argsHeader + "  - name: NodePoolReady\n    args:\n      poolLabelKeys: [a, a]\n      requiredLabelKeys: [\"bad key\"]\n      poolRequiredLabelKeys: {\"\": [x]}\n      unknownPoolPolicy: Sometimes\n      labelSetNamespace: Not_A_Namespace\n",
	argsHeader + "  - name: NodePoolReady\n    args:\n      requiredLabelKeys: topology.pool-scheduler.io/update-domain\n      ignoreDaemonSetPods: \"yes\"\n",
	argsHeader + "  - name: NodePoolReady\n    args: null\n",
	argsHeader + "  - name: SystemPoolGuard\n    args:\n      systemPools: []\n      systemNodeSelector:\n        matchLabels: {kubernetes.azure.com/mode: system}\n        matchExpressions:\n        - {key: example.com/x, operator: In, values: [a]}\n      systemNamespaces: [kube-system]\n      systemPriorityClasses: [system-cluster-critical]\n      systemTolerationKeys: [CriticalAddonsOnly]\n      daemonSetPodsAreSystemPods: false\n",
	argsHeader + "  - name: SystemPoolGuard\n    args:\n      systemPools: [\"\"]\n      systemNodeSelector:\n        matchExpressions:\n        - {key: x, operator: Exists, values: [a]}\n      systemNamespaces: [Kube_System]\n      systemPriorityClasses: [\"-\"]\n      systemTolerationKeys: [\"a b\"]\n",
	argsHeader + "  - name: SystemPoolGuard\n    args:\n      systemPools: []\n      systemNodeSelector: {}\n",
	argsHeader + "  - name: DomainSpread\n    args:\n      mode: Hard\n      maxSkew: 2\n      rejectNodesMissingKeys: true\n      spreadPodsWithConstraints: true\n      dimensions:\n      - name: zone\n        labelKeys: [topology.kubernetes.io/zone]\n      - name: fault-domain\n        labelKeys: [oci.oraclecloud.com/fault-domain]\n        joint: true\n",
	argsHeader + "  - name: DomainSpread\n    args:\n      mode: Sometimes\n      maxSkew: 0\n      dimensions:\n      - {name: a, labelKeys: [], joint: true}\n      - {name: a, labelKeys: [\"x y\"]}\n      - {name: B, labelKeys: [k]}\n      - {name: c, labelKeys: [k]}\n      - {name: d, labelKeys: [k]}\n",
	argsHeader + "  - name: DomainSpread\n    args:\n      maxSkew: 4294967296\n",
	argsHeader + "  - name: DomainSpread\n    args:\n      maxSkew: -2147483648\n      dimensions: [{name: x}]\n",
	argsHeader + "  - name: NodePoolReady\n    args: &a {unknownPoolPolicy: Allow}\n  - name: SystemPoolGuard\n    args: {systemPools: [system]}\n  - name: DomainSpread\n    args: {mode: Soft}\n",
	argsHeader + "  - name: NodePoolReady\n    args: {}\n  - name: NodePoolReady\n    args: {}\n",
	argsHeader + "  - name: NodePoolAffinity\n    args:\n      poolLabelKeys: [kubernetes.azure.com/agentpool, karpenter.sh/nodepool]\n",
	argsHeader + "  - name: NodePoolAffinity\n    args:\n      poolLabelKeys: [\"not a key\", \"\"]\n",
	`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration","profiles":[{"schedulerName":"p","pluginConfig":[{"name":"DomainSpread","args":{"dimensions":[{"name":"host","labelKeys":["kubernetes.io/hostname"]}]}}]}]}`,
	"apiVersion: kubescheduler.config.k8s.io/v1\nkind: NodePoolReadyArgs\n",
	"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
}

type argsCheck struct {
	validate func(*field.Path, runtime.Object) error
	// invariants must hold for args that pass validation.
	invariants func(runtime.Object) error
	// build runs the plugin's factory, which the scheduler calls with the decoded args; nil if
	// the factory needs a live apiserver.
	build func(context.Context, runtime.Object) error
}

// FuzzDecodePluginArgs feeds arbitrary bytes through the path the pool-scheduler binary takes
// with its --config file: kube-scheduler's strict, defaulting decoder with our args registered,
// kube-scheduler's validation of the whole configuration, then each plugin's args validation
// (and, where it needs no apiserver, the plugin's factory). Properties: nothing panics; our
// plugins' args always arrive typed and defaulted (never as runtime.Unknown); validation either
// refuses them with errors that each name a field under args, or accepts args that hold the
// invariants the plugins rely on and that the factories accept; and a configuration that loads
// re-encodes (as kube-scheduler logs and writes it) to one that loads to the same args.
// freshInformers gives each plugin built by the fuzz target its own (never started) informer
// factory: DomainSpread adds a pod event handler, and a million of them on one informer would
// hold a million listeners.
type freshInformers struct{ framework.Handle }

func (freshInformers) SharedInformerFactory() informers.SharedInformerFactory {
	// No client: the informer is never started.
	return informers.NewSharedInformerFactory(nil, 0)
}

func FuzzDecodePluginArgs(f *testing.F) {
	f.Add(shipped.Config)
	for _, s := range argsSeeds {
		f.Add([]byte(s))
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	handle, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nil)))
	if err != nil {
		f.Fatal(err)
	}
	checks := map[string]argsCheck{
		nodepoolready.Name: {
			validate: func(p *field.Path, o runtime.Object) error {
				return validation.ValidateNodePoolReadyArgs(p, o.(*argsconfig.NodePoolReadyArgs))
			},
			invariants: func(o runtime.Object) error {
				a := o.(*argsconfig.NodePoolReadyArgs)
				switch a.UnknownPoolPolicy {
				case argsconfig.UnknownPoolAuto, argsconfig.UnknownPoolReject, argsconfig.UnknownPoolAllow:
				default:
					return fmt.Errorf("unknownPoolPolicy %q", a.UnknownPoolPolicy)
				}
				if len(a.PoolLabelKeys) == 0 {
					return errors.New("no pool label keys")
				}
				return nil
			},
		},
		systempoolguard.Name: {
			validate: func(p *field.Path, o runtime.Object) error {
				return validation.ValidateSystemPoolGuardArgs(p, o.(*argsconfig.SystemPoolGuardArgs))
			},
			invariants: func(o runtime.Object) error {
				a := o.(*argsconfig.SystemPoolGuardArgs)
				if len(a.PoolLabelKeys) == 0 {
					return errors.New("no pool label keys")
				}
				if len(a.SystemPools) == 0 && a.SystemNodeSelector == nil {
					return errors.New("no way to name a system node")
				}
				return nil
			},
			build: func(ctx context.Context, o runtime.Object) error {
				_, err := systempoolguard.New(ctx, o, handle)
				return err
			},
		},
		nodepoolaffinity.Name: {
			validate: func(p *field.Path, o runtime.Object) error {
				return validation.ValidateNodePoolAffinityArgs(p, o.(*argsconfig.NodePoolAffinityArgs))
			},
			invariants: func(o runtime.Object) error {
				if len(o.(*argsconfig.NodePoolAffinityArgs).PoolLabelKeys) == 0 {
					return errors.New("no pool label keys")
				}
				return nil
			},
			build: func(ctx context.Context, o runtime.Object) error {
				_, err := nodepoolaffinity.New(ctx, o, handle)
				return err
			},
		},
		domainspread.Name: {
			validate: func(p *field.Path, o runtime.Object) error {
				return validation.ValidateDomainSpreadArgs(p, o.(*argsconfig.DomainSpreadArgs))
			},
			invariants: func(o runtime.Object) error {
				a := o.(*argsconfig.DomainSpreadArgs)
				if n := len(a.Dimensions); n < 1 || n > validation.MaxSpreadDimensions {
					return fmt.Errorf("%d dimensions", n)
				}
				if a.MaxSkew < 1 || (a.Mode != argsconfig.SpreadSoft && a.Mode != argsconfig.SpreadHard) {
					return fmt.Errorf("maxSkew %d, mode %q", a.MaxSkew, a.Mode)
				}
				return nil
			},
			build: func(ctx context.Context, o runtime.Object) error {
				_, err := domainspread.New(ctx, o, freshInformers{handle})
				return err
			},
		},
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := loadConfig(data)
		if err != nil {
			return
		}
		// kube-scheduler validates the whole configuration before building profiles; it must
		// cope with whatever decoded (its verdict does not matter here).
		_ = schedvalidation.ValidateKubeSchedulerConfiguration(cfg)

		valid := map[string]runtime.Object{}
		for i, prof := range cfg.Profiles {
			for j, pc := range prof.PluginConfig {
				check, ours := checks[pc.Name]
				if !ours {
					continue
				}
				path := field.NewPath("args")
				if pc.Args == nil {
					t.Fatalf("profiles[%d].pluginConfig[%d] (%s): no args after decoding and defaulting", i, j, pc.Name)
				}
				if _, unknown := pc.Args.(*runtime.Unknown); unknown {
					t.Fatalf("profiles[%d].pluginConfig[%d] (%s): args decoded as runtime.Unknown", i, j, pc.Name)
				}
				if err := check.validate(path, pc.Args); err != nil {
					expectFieldErrors(t, pc.Name, err)
					continue
				}
				if err := check.invariants(pc.Args); err != nil {
					t.Fatalf("%s: validation accepted args that break an invariant: %v: %#v", pc.Name, err, pc.Args)
				}
				if check.build != nil {
					if err := check.build(ctx, pc.Args); err != nil {
						t.Fatalf("%s: validation accepted args the plugin refuses: %v: %#v", pc.Name, err, pc.Args)
					}
				}
				valid[fmt.Sprintf("%d/%d", i, j)] = pc.Args
			}
		}
		if len(valid) == 0 {
			return
		}

		// kube-scheduler writes the loaded configuration back out (--write-config-to, and its
		// startup log); loading that must give the same args.
		again, err := loadConfig(encodeConfig(t, cfg))
		if err != nil {
			t.Fatalf("the re-encoded configuration does not load: %v", err)
		}
		for i, prof := range again.Profiles {
			for j, pc := range prof.PluginConfig {
				want, ok := valid[fmt.Sprintf("%d/%d", i, j)]
				if !ok {
					continue
				}
				// nil and [] mean the same after defaulting (every list that is defaulted only
				// when nil has been defaulted by now).
				if diff := cmp.Diff(want, pc.Args, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("%s args changed in an encode/decode round trip (-loaded +reloaded):\n%s", pc.Name, diff)
				}
			}
		}
	})
}

// expectFieldErrors checks that every error of a refused args object names a field under args.
func expectFieldErrors(t *testing.T, plugin string, err error) {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("%s: validation error %v (%T) is not a field error list", plugin, err, err)
	}
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			t.Fatalf("%s: validation error %q (%T) is not a field error", plugin, e, e)
		}
		if fe.Field != "args" && !strings.HasPrefix(fe.Field, "args.") && !strings.HasPrefix(fe.Field, "args[") {
			t.Fatalf("%s: validation error %q does not name a field under args", plugin, e)
		}
	}
}

// TestArgsFuzzSeedsCoverEveryPlugin keeps the seeds honest: each of our plugins appears with
// args that validate and with args that do not.
func TestArgsFuzzSeedsCoverEveryPlugin(t *testing.T) {
	validated := map[string]map[bool]bool{}
	for _, s := range append([]string{string(shipped.Config)}, argsSeeds...) {
		cfg, err := loadConfig([]byte(s))
		if err != nil {
			continue
		}
		for _, prof := range cfg.Profiles {
			for _, pc := range prof.PluginConfig {
				var err error
				switch a := pc.Args.(type) {
				case *argsconfig.NodePoolReadyArgs:
					err = validation.ValidateNodePoolReadyArgs(field.NewPath("args"), a)
				case *argsconfig.SystemPoolGuardArgs:
					err = validation.ValidateSystemPoolGuardArgs(field.NewPath("args"), a)
				case *argsconfig.DomainSpreadArgs:
					err = validation.ValidateDomainSpreadArgs(field.NewPath("args"), a)
				case *argsconfig.NodePoolAffinityArgs:
					err = validation.ValidateNodePoolAffinityArgs(field.NewPath("args"), a)
				default:
					continue
				}
				if validated[pc.Name] == nil {
					validated[pc.Name] = map[bool]bool{}
				}
				validated[pc.Name][err == nil] = true
			}
		}
	}
	want := map[string]map[bool]bool{
		nodepoolready.Name:    {true: true, false: true},
		systempoolguard.Name:  {true: true, false: true},
		domainspread.Name:     {true: true, false: true},
		nodepoolaffinity.Name: {true: true, false: true},
	}
	if diff := cmp.Diff(want, validated); diff != "" {
		t.Errorf("seeds with valid (true) and invalid (false) args per plugin (-want +got):\n%s", diff)
	}
}
