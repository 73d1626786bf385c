package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/informers"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/test/utils/ktesting"
	"sigs.k8s.io/yaml"

	shipped "github.com/pool-scheduler/pool-scheduler/manifests/scheduler"
	"github.com/pool-scheduler/pool-scheduler/pkg/plugins"
)

// loadLikeTheBinary loads a configuration file as pool-scheduler does at startup: kube-scheduler's
// LoadConfigFromFile (strict decoding and defaults, our args registered by this package's
// imports), kube-scheduler's validation, then the plugin's factory, which validates its args.
// (The binary builds every plugin of the profile; only the plugin under test is built here,
// because NodePoolReady with valid args would start watching an apiserver.)
func loadLikeTheBinary(ctx context.Context, t *testing.T, path, plugin string) error {
	t.Helper()
	cfg, err := options.LoadConfigFromFile(ktesting.Init(t).Logger(), path)
	if err != nil {
		return err
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return err
	}
	// An informer factory without a client: DomainSpread registers a pod handler; nothing starts it.
	handle, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nil)),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(nil, 0)))
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == plugin {
			if _, err := plugins.Registry()[plugin](ctx, pc.Args, handle); err != nil {
				// As the framework reports it.
				return fmt.Errorf("initializing plugin %q: %w", plugin, err)
			}
			return nil
		}
	}
	t.Fatalf("no pluginConfig for %s", plugin)
	return nil
}

// TestEveryInvalidArgNamesTheField takes the shipped configuration, makes one arg of one plugin
// invalid at a time (every arg of NodePoolReadyArgs, SystemPoolGuardArgs and DomainSpreadArgs),
// and checks that loading it as the binary does fails with an error naming the plugin (or its
// args type) and the field. The shipped configuration itself must load.
func TestEveryInvalidArgNamesTheField(t *testing.T) {
	tests := []struct {
		plugin string
		name   string
		// args are merged into the plugin's shipped args.
		args map[string]any
		// want must all appear in the error.
		want []string
	}{
		{plugin: "NodePoolReady", name: "shipped"},
		{plugin: "NodePoolReady", name: "poolLabelKeys invalid key", args: map[string]any{"poolLabelKeys": []any{"agentpool", "not a key"}}, want: []string{`"NodePoolReady"`, "args.poolLabelKeys[1]", "not a key"}},
		{plugin: "NodePoolReady", name: "poolLabelKeys duplicate", args: map[string]any{"poolLabelKeys": []any{"agentpool", "agentpool"}}, want: []string{`"NodePoolReady"`, "args.poolLabelKeys[1]", "Duplicate"}},
		{plugin: "NodePoolReady", name: "requiredLabelKeys", args: map[string]any{"requiredLabelKeys": []any{"/x"}}, want: []string{`"NodePoolReady"`, "args.requiredLabelKeys[0]"}},
		{plugin: "NodePoolReady", name: "poolRequiredLabelKeys pool name", args: map[string]any{"poolRequiredLabelKeys": map[string]any{"bad pool": []any{"k"}}}, want: []string{`"NodePoolReady"`, "args.poolRequiredLabelKeys[bad pool]"}},
		{plugin: "NodePoolReady", name: "poolRequiredLabelKeys key", args: map[string]any{"poolRequiredLabelKeys": map[string]any{"gpu": []any{"k", "x y"}}}, want: []string{`"NodePoolReady"`, "args.poolRequiredLabelKeys[gpu][1]", "x y"}},
		{plugin: "NodePoolReady", name: "unknownPoolPolicy", args: map[string]any{"unknownPoolPolicy": "Sometimes"}, want: []string{`"NodePoolReady"`, "args.unknownPoolPolicy", "Sometimes", "Allow"}},
		{plugin: "NodePoolReady", name: "labelSetNamespaces", args: map[string]any{"labelSetNamespaces": []any{"pool-scheduler", "Not_A_Namespace"}}, want: []string{`"NodePoolReady"`, "args.labelSetNamespaces[1]", "Not_A_Namespace"}},
		{plugin: "NodePoolReady", name: "labelSetNamespaces duplicate", args: map[string]any{"labelSetNamespaces": []any{"a", "a"}}, want: []string{`"NodePoolReady"`, "args.labelSetNamespaces[1]", "Duplicate"}},
		{plugin: "NodePoolReady", name: "labelSetNamespace (deprecated)", args: map[string]any{"labelSetNamespace": "Not_A_Namespace"}, want: []string{`"NodePoolReady"`, "args.labelSetNamespaces[1]", "Not_A_Namespace"}},
		{plugin: "NodePoolReady", name: "ignoreDaemonSetPods wrong type", args: map[string]any{"ignoreDaemonSetPods": "yes"}, want: []string{"NodePoolReadyArgs", "ignoreDaemonSetPods"}},
		{plugin: "NodePoolReady", name: "unknown field", args: map[string]any{"requiredLabelKey": []any{"x"}}, want: []string{`unknown field "requiredLabelKey"`}},

		{plugin: "SystemPoolGuard", name: "shipped"},
		{plugin: "SystemPoolGuard", name: "poolLabelKeys", args: map[string]any{"poolLabelKeys": []any{"a b"}}, want: []string{`"SystemPoolGuard"`, "args.poolLabelKeys[0]", "a b"}},
		{plugin: "SystemPoolGuard", name: "systemPools invalid name", args: map[string]any{"systemPools": []any{"system", "bad pool"}}, want: []string{`"SystemPoolGuard"`, "args.systemPools[1]", "bad pool"}},
		{plugin: "SystemPoolGuard", name: "systemPools empty without a selector", args: map[string]any{"systemPools": []any{}, "systemNodeSelector": map[string]any{}}, want: []string{`"SystemPoolGuard"`, "args.systemPools", "systemNodeSelector"}},
		{plugin: "SystemPoolGuard", name: "systemNodeSelector", args: map[string]any{"systemNodeSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "k", "operator": "Sometimes"}}}}, want: []string{`"SystemPoolGuard"`, "args.systemNodeSelector", "Sometimes"}},
		{plugin: "SystemPoolGuard", name: "systemNamespaces", args: map[string]any{"systemNamespaces": []any{"Kube_System"}}, want: []string{`"SystemPoolGuard"`, "args.systemNamespaces[0]", "Kube_System"}},
		{plugin: "SystemPoolGuard", name: "systemPriorityClasses", args: map[string]any{"systemPriorityClasses": []any{"Not A Class"}}, want: []string{`"SystemPoolGuard"`, "args.systemPriorityClasses[0]", "Not A Class"}},
		{plugin: "SystemPoolGuard", name: "systemTolerationKeys", args: map[string]any{"systemTolerationKeys": []any{"a b"}}, want: []string{`"SystemPoolGuard"`, "args.systemTolerationKeys[0]", "a b"}},
		{plugin: "SystemPoolGuard", name: "daemonSetPodsAreSystemPods wrong type", args: map[string]any{"daemonSetPodsAreSystemPods": "yes"}, want: []string{"SystemPoolGuardArgs", "daemonSetPodsAreSystemPods"}},

		{plugin: "DomainSpread", name: "shipped"},
		{plugin: "DomainSpread", name: "dimensions too many", args: map[string]any{"dimensions": []any{dim("a", "k"), dim("b", "k"), dim("c", "k"), dim("d", "k"), dim("e", "k")}}, want: []string{`"DomainSpread"`, "args.dimensions", "must have at most 4 items"}},
		{plugin: "DomainSpread", name: "dimensions name missing", args: map[string]any{"dimensions": []any{map[string]any{"labelKeys": []any{"k"}}}}, want: []string{`"DomainSpread"`, "args.dimensions[0].name", "Required"}},
		{plugin: "DomainSpread", name: "dimensions name invalid", args: map[string]any{"dimensions": []any{dim("Update_Domain", "k")}}, want: []string{`"DomainSpread"`, "args.dimensions[0].name", "Update_Domain"}},
		{plugin: "DomainSpread", name: "dimensions name duplicate", args: map[string]any{"dimensions": []any{dim("a", "k"), dim("a", "j")}}, want: []string{`"DomainSpread"`, "args.dimensions[1].name", "Duplicate"}},
		{plugin: "DomainSpread", name: "dimensions labelKeys empty", args: map[string]any{"dimensions": []any{map[string]any{"name": "a", "labelKeys": []any{}}}}, want: []string{`"DomainSpread"`, "args.dimensions[0].labelKeys", "Required"}},
		{plugin: "DomainSpread", name: "dimensions labelKeys invalid", args: map[string]any{"dimensions": []any{dim("a", "k", "x y")}}, want: []string{`"DomainSpread"`, "args.dimensions[0].labelKeys[1]", "x y"}},
		{plugin: "DomainSpread", name: "dimensions joint first", args: map[string]any{"dimensions": []any{map[string]any{"name": "a", "labelKeys": []any{"k"}, "joint": true}}}, want: []string{`"DomainSpread"`, "args.dimensions[0].joint"}},
		{plugin: "DomainSpread", name: "mode", args: map[string]any{"mode": "Sometimes"}, want: []string{`"DomainSpread"`, "args.mode", "Sometimes", "Hard"}},
		{plugin: "DomainSpread", name: "maxSkew", args: map[string]any{"maxSkew": 0}, want: []string{`"DomainSpread"`, "args.maxSkew", "at least 1"}},
		{plugin: "DomainSpread", name: "maxSkew too large for int32", args: map[string]any{"maxSkew": 4294967296}, want: []string{"DomainSpreadArgs", "maxSkew"}},
		{plugin: "DomainSpread", name: "spreadPodsWithConstraints wrong type", args: map[string]any{"spreadPodsWithConstraints": "yes"}, want: []string{"DomainSpreadArgs", "spreadPodsWithConstraints"}},
		{plugin: "DomainSpread", name: "rejectNodesMissingKeys wrong type", args: map[string]any{"rejectNodesMissingKeys": "yes"}, want: []string{"DomainSpreadArgs", "rejectNodesMissingKeys"}},
	}
	for _, tt := range tests {
		t.Run(tt.plugin+"/"+tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			doc := map[string]any{}
			if err := yaml.Unmarshal(shipped.Config, &doc); err != nil {
				t.Fatal(err)
			}
			args := pluginArgs(t, doc, tt.plugin)
			for k, v := range tt.args {
				args[k] = v
			}
			data, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.want == nil && tt.plugin == "NodePoolReady" {
				// Valid NodePoolReady args would start an informer: loading and validation only.
				_, err := options.LoadConfigFromFile(ktesting.Init(t).Logger(), path)
				if err != nil {
					t.Fatalf("the shipped configuration does not load: %v", err)
				}
				return
			}
			err = loadLikeTheBinary(ctx, t, path, tt.plugin)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("the shipped configuration is refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", data)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q: %v", w, err)
				}
			}
		})
	}
}

func dim(name string, keys ...string) map[string]any {
	var ks []any
	for _, k := range keys {
		ks = append(ks, k)
	}
	return map[string]any{"name": name, "labelKeys": ks}
}

func pluginArgs(t *testing.T, doc map[string]any, plugin string) map[string]any {
	t.Helper()
	for _, pc := range doc["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
		pc := pc.(map[string]any)
		if pc["name"] == plugin {
			if pc["args"] == nil {
				pc["args"] = map[string]any{}
			}
			return pc["args"].(map[string]any)
		}
	}
	t.Fatalf("no pluginConfig for %s", plugin)
	return nil
}

// TestShippedClientConnection decodes manifests/scheduler/config.yaml as the binary does and
// checks its client settings: the rate limit chosen in the file's comments (docs/performance.md
// says why), not kube-scheduler's defaults (50 QPS, burst 100), which would hold the scheduler
// to about 50 bound pods/s; in-cluster credentials; and the protobuf content type the defaults
// give.
func TestShippedClientConnection(t *testing.T) {
	path := filepath.Join("..", "..", "..", "manifests", "scheduler", "config.yaml")
	cfg, err := options.LoadConfigFromFile(ktesting.Init(t).Logger(), path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Fatalf("%s does not validate: %v", path, err)
	}
	want := componentbaseconfig.ClientConnectionConfiguration{
		Kubeconfig:  "",
		ContentType: "application/vnd.kubernetes.protobuf",
		QPS:         1000,
		Burst:       2000,
	}
	if diff := cmp.Diff(want, cfg.ClientConnection); diff != "" {
		t.Errorf("%s clientConnection (-want +got):\n%s", path, diff)
	}
}
