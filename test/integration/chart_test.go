package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/test/utils/ktesting"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config"
	configv1 "github.com/pool-scheduler/pool-scheduler/pkg/apis/config/v1"
	"github.com/pool-scheduler/pool-scheduler/pkg/apis/config/validation"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
	"github.com/pool-scheduler/pool-scheduler/test/util/releaselines"
)

// The chart is rendered as `helm install` would: this release name and namespace (the one the
// kustomize manifests use, so both can be compared), against a Kubernetes 1.34 cluster.
const (
	chartRelease   = "pool-scheduler"
	chartNamespace = "pool-scheduler"
	chartKube      = "v1.34.10"
)

func chartDir() string { return util.ChartDir() }

// renderedChart is what `helm template --include-crds` would print, as objects.
type renderedChart struct {
	objects []*unstructured.Unstructured
	crds    []chart.CRD
}

// renderChart renders the chart with values (YAML, merged over values.yaml) through the Helm SDK:
// schema validation, kubeVersion check, strict templates (a missing value is an error).
func renderChart(t *testing.T, namespace, values string) (*renderedChart, error) {
	t.Helper()
	return renderChartFor(t, chartKube, namespace, values)
}

// renderChartFor renders the chart for a cluster of Kubernetes version kube
// (.Capabilities.KubeVersion), without helm's kubeVersion check (TestHelmChartKubeVersion has it).
func renderChartFor(t *testing.T, kube, namespace, values string, apiVersions ...string) (*renderedChart, error) {
	t.Helper()
	objs, crds, err := util.RenderChart(kube, chartRelease, namespace, values, apiVersions...)
	if err != nil {
		return nil, err
	}
	return &renderedChart{objects: objs, crds: crds}, nil
}

func decodeObjects(data string) ([]*unstructured.Unstructured, error) {
	return util.DecodeObjects(data)
}

func objectID(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

func (r *renderedChart) ids() []string {
	var ids []string
	for _, o := range r.objects {
		ids = append(ids, objectID(o))
	}
	sort.Strings(ids)
	return ids
}

// getIn is get for a namespaced object.
func (r *renderedChart) getIn(t *testing.T, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("rendered chart has no %s %s/%s; it has %v", kind, namespace, name, r.ids())
	return nil
}

func (r *renderedChart) get(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("rendered chart has no %s %s; it has %v", kind, name, r.ids())
	return nil
}

// schedulerDeploymentName is the name of the Deployment that runs kube-scheduler's --config.
func (r *renderedChart) schedulerDeploymentName(t *testing.T) string {
	t.Helper()
	for _, o := range r.objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		// pool-labeler's modes read the same file; the scheduler runs no subcommand.
		if args := containerArgs(t, o); containsString(args, "--config=/etc/pool-scheduler/config.yaml") && !strings.HasPrefix(args[0], "--") {
			continue
		}
		if args := containerArgs(t, o); containsString(args, "--config=/etc/pool-scheduler/config.yaml") {
			return o.GetName()
		}
	}
	t.Fatalf("no scheduler Deployment among %v", r.ids())
	return ""
}

// schedulerConfig decodes the rendered KubeSchedulerConfiguration the way kube-scheduler does
// (strictly, with pool-scheduler's args registered, defaulted) and validates it with
// kube-scheduler's validation and pool-scheduler's args validation.
func (r *renderedChart) schedulerConfig(t *testing.T, configMap string) (*schedconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	cm := r.get(t, "ConfigMap", configMap)
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(ktesting.Init(t).Logger(), path)
	if err != nil {
		return nil, fmt.Errorf("decoding the rendered scheduler config: %w\n%s", err, data)
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, fmt.Errorf("kube-scheduler rejects the rendered config: %w", err)
	}
	for i := range cfg.Profiles {
		for j, pc := range cfg.Profiles[i].PluginConfig {
			path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
			switch args := pc.Args.(type) {
			case *config.NodePoolReadyArgs:
				err = validation.ValidateNodePoolReadyArgs(path, args)
			case *config.SystemPoolGuardArgs:
				err = validation.ValidateSystemPoolGuardArgs(path, args)
			case *config.DomainSpreadArgs:
				err = validation.ValidateDomainSpreadArgs(path, args)
			default:
				if strings.HasPrefix(reflect.TypeOf(pc.Args).String(), "*runtime.") {
					err = fmt.Errorf("%s: args of %s were not decoded into a typed struct (%T)", path, pc.Name, pc.Args)
				}
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return cfg, nil
}

// TestHelmChart renders the chart for several values combinations and applies every object to
// a real kube-apiserver with server-side apply, dry-run and strict field validation: the API's own
// schemas, defaulting and admission (including CEL compilation of the ValidatingAdmissionPolicy)
// accept it. The rendered scheduler configuration must decode strictly and validate.
func TestHelmChart(t *testing.T) {
	tCtx := ktesting.Init(t)
	// The MutatingAdmissionPolicy API is served (util.ControlPlaneFlags), so admission.mode=policy
	// is validated (CEL compiled).
	cp := util.StartControlPlane(t)
	installServiceMonitorCRD(tCtx, t, cp)
	applier := newDryRunApplier(t, cp)

	schedulerObjects := []string{
		"ClusterRole pool-scheduler",
		"ClusterRoleBinding pool-scheduler",
		"ConfigMap pool-scheduler/pool-scheduler-config",
		"Deployment pool-scheduler/pool-scheduler",
		"PodDisruptionBudget pool-scheduler/pool-scheduler",
		"Role pool-scheduler/pool-scheduler:leader-election",
		"RoleBinding kube-system/pool-scheduler:extension-apiserver-authentication-reader",
		"RoleBinding pool-scheduler/pool-scheduler:leader-election",
		"ServiceAccount pool-scheduler/pool-scheduler",
		"ValidatingAdmissionPolicy pool-scheduler-pod-writes",
		"ValidatingAdmissionPolicy pool-scheduler-volume-binding",
		"ValidatingAdmissionPolicyBinding pool-scheduler-pod-writes",
		"ValidatingAdmissionPolicyBinding pool-scheduler-volume-binding",
	}
	controllerObjects := []string{
		"ClusterRole pool-labeler",
		"ClusterRoleBinding pool-labeler",
		"Deployment pool-scheduler/pool-labeler",
		"ValidatingAdmissionPolicy pool-labeler-managed-labels",
		"ValidatingAdmissionPolicyBinding pool-labeler-managed-labels",
		"PodDisruptionBudget pool-scheduler/pool-labeler",
		"Role pool-scheduler/pool-labeler:leader-election",
		"RoleBinding pool-scheduler/pool-labeler:leader-election",
		"Role pool-scheduler/pool-labeler:label-set-status",
		"RoleBinding pool-scheduler/pool-labeler:label-set-status",
		"ServiceAccount pool-scheduler/pool-labeler",
	}
	domainObjects := []string{
		"ClusterRole pool-labeler-domain",
		"ClusterRoleBinding pool-labeler-domain",
		"DaemonSet pool-scheduler/pool-labeler-domain",
		// Events about its node live in namespace default, whatever the release namespace.
		"Role default/pool-labeler-domain",
		"RoleBinding default/pool-labeler-domain",
		"ServiceAccount pool-scheduler/pool-labeler-domain",
		"ValidatingAdmissionPolicy pool-labeler-domain-own-node",
		"ValidatingAdmissionPolicy pool-labeler-domain-own-node-events",
		"ValidatingAdmissionPolicyBinding pool-labeler-domain-own-node",
		"ValidatingAdmissionPolicyBinding pool-labeler-domain-own-node-events",
	}
	monitoringObjects := []string{
		"Service pool-scheduler/pool-labeler",
		"Service pool-scheduler/pool-scheduler",
		"Secret pool-scheduler/pool-scheduler-metrics-ca-key",
		"Secret pool-scheduler/pool-scheduler-metrics-serving",
		"ServiceMonitor pool-scheduler/pool-labeler",
		"ServiceMonitor pool-scheduler/pool-scheduler",
		// The certificate keeper (#34).
		"ClusterRole pool-scheduler-certs",
		"ClusterRoleBinding pool-scheduler-certs",
		"Deployment pool-scheduler/pool-scheduler-certs",
		"Role pool-scheduler/pool-scheduler-certs",
		"RoleBinding pool-scheduler/pool-scheduler-certs",
		"Service pool-scheduler/pool-scheduler-certs",
		"ServiceAccount pool-scheduler/pool-scheduler-certs",
		"ServiceMonitor pool-scheduler/pool-scheduler-certs",
	}
	webhookObjects := []string{
		"ClusterRole pool-scheduler-webhook",
		"ClusterRoleBinding pool-scheduler-webhook",
		"Deployment pool-scheduler/pool-scheduler-webhook",
		"MutatingWebhookConfiguration pool-scheduler",
		"PodDisruptionBudget pool-scheduler/pool-scheduler-webhook",
		"Role pool-scheduler/pool-scheduler-webhook-handoff",
		"RoleBinding pool-scheduler/pool-scheduler-webhook-handoff",
		"Secret pool-scheduler/pool-scheduler-webhook-tls",
		// The certificate keeper holds the webhook's CA key (#34).
		"Secret pool-scheduler/pool-scheduler-webhook-ca-key",
		"ClusterRole pool-scheduler-certs",
		"ClusterRoleBinding pool-scheduler-certs",
		"Deployment pool-scheduler/pool-scheduler-certs",
		"Role pool-scheduler/pool-scheduler-certs",
		"RoleBinding pool-scheduler/pool-scheduler-certs",
		"ServiceAccount pool-scheduler/pool-scheduler-certs",
		"Service pool-scheduler/pool-scheduler-webhook",
		"ServiceAccount pool-scheduler/pool-scheduler-webhook",
		"ValidatingAdmissionPolicy pool-scheduler-webhook-ca-bundle",
		"ValidatingAdmissionPolicyBinding pool-scheduler-webhook-ca-bundle",
	}
	handoffObjects := []string{
		"ClusterRole pool-scheduler-handback",
		"ClusterRole pool-scheduler-handoff",
		"ClusterRoleBinding pool-scheduler-handback",
		"ClusterRoleBinding pool-scheduler-handoff",
		"ConfigMap pool-scheduler/pool-scheduler-handoff",
		"Deployment pool-scheduler/pool-scheduler-handoff",
		"Job pool-scheduler/pool-scheduler-handback",
		"Role pool-scheduler/pool-scheduler-handoff",
		"RoleBinding pool-scheduler/pool-scheduler-handoff",
		"ServiceAccount pool-scheduler/pool-scheduler-handback",
		"ServiceAccount pool-scheduler/pool-scheduler-handoff",
		"ValidatingAdmissionPolicy pool-scheduler-handoff-deletes",
		"ValidatingAdmissionPolicyBinding pool-scheduler-handoff-deletes",
	}
	// The spread keeper (#35), on with DomainSpread.
	spreadObjects := []string{
		"ClusterRole pool-scheduler-spread",
		"ClusterRoleBinding pool-scheduler-spread",
		"Deployment pool-scheduler/pool-scheduler-spread",
		"Role pool-scheduler/pool-scheduler-spread",
		"RoleBinding pool-scheduler/pool-scheduler-spread",
		"ServiceAccount pool-scheduler/pool-scheduler-spread",
		"ValidatingAdmissionPolicy pool-scheduler-spread-deletion-cost",
		"ValidatingAdmissionPolicyBinding pool-scheduler-spread-deletion-cost",
	}
	concat := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		sort.Strings(out)
		return out
	}

	tests := []struct {
		name      string
		namespace string
		values    string
		want      []string
		// check inspects the decoded, validated scheduler configuration.
		check func(t *testing.T, r *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration)
	}{{
		name: "defaults",
		// The domain labeler is on: its affinity keeps it to AKS nodes, its selector to Linux.
		want: concat(schedulerObjects, controllerObjects, domainObjects, webhookObjects, handoffObjects, spreadObjects),
		check: func(t *testing.T, r *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration) {
			checkMatchesShippedConfig(t, r, cfg)
			checkLabelSetNamespaces(t, r, cfg, chartNamespace)
			ds := r.get(t, "DaemonSet", "pool-labeler-domain")
			selector, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "template", "spec", "nodeSelector")
			if diff := cmp.Diff(map[string]string{"kubernetes.io/os": "linux"}, selector); diff != "" {
				t.Errorf("domain labeler nodeSelector (-want +got):\n%s", diff)
			}
			args := util.PluginArgs(t, &cfg.Profiles[0], "SystemPoolGuard").(*config.SystemPoolGuardArgs)
			if diff := cmp.Diff(&metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}}, args.SystemNodeSelector); diff != "" {
				t.Errorf("default systemNodeSelector: AKS system-mode pools (-want +got):\n%s", diff)
			}
		},
	}, {
		name:   "AKS system-mode selector switched off",
		values: `scheduler: {plugins: {systemPoolGuard: {args: {systemNodeSelector: {}}}}}`,
		want:   concat(schedulerObjects, controllerObjects, domainObjects, webhookObjects, handoffObjects, spreadObjects),
		check: func(t *testing.T, _ *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration) {
			args := util.PluginArgs(t, &cfg.Profiles[0], "SystemPoolGuard").(*config.SystemPoolGuardArgs)
			if args.SystemNodeSelector == nil || len(args.SystemNodeSelector.MatchLabels)+len(args.SystemNodeSelector.MatchExpressions) != 0 {
				t.Errorf("systemNodeSelector = %v, want the empty selector (off)", args.SystemNodeSelector)
			}
		},
	}, {
		name: "everything enabled",
		values: `
labeler:
  controller: {holdWarningAfter: 10m, overwriteConflicts: true, service: {enabled: true}, leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s}
  domain: {enabled: true, onNotAzure: exit}
scheduler:
  service: {enabled: true}
  podDisruptionBudget: {minAvailable: null, maxUnavailable: 1}
  extraArgs: [--tls-min-version=VersionTLS13]
  # A burst of a million renders as an integer, not as 1e+06 (which would not decode).
  clientConnection: {qps: 300.5, burst: 1000000}
  flowSchema: {enabled: true}
  plugins:
    nodePoolReady:
      args:
        requiredLabelKeys: [topology.pool-scheduler.io/update-domain]
        poolRequiredLabelKeys: {gpu: [nvidia.com/gpu.product]}
        unknownPoolPolicy: Reject
        ignoreDaemonSetPods: false
    systemPoolGuard:
      weight: 20
      args:
        systemPools: []
        systemNodeSelector: {matchLabels: {kubernetes.azure.com/mode: system}}
        systemNamespaces: [kube-system, monitoring]
        daemonSetPodsAreSystemPods: false
    domainSpread:
      args:
        mode: Hard
        maxSkew: 2
        spreadPodsWithConstraints: true
        rejectNodesMissingKeys: true
        dimensions:
        - {name: zone, labelKeys: [topology.kubernetes.io/zone]}
        - {name: fault-domain, labelKeys: [topology.kubernetes.azure.com/fault-domain], joint: true}
monitoring:
  serviceMonitor: {enabled: true, labels: {release: prometheus}}
admission: {mode: policy, namespaces: [team-a, kube-system]}
`,
		want: concat(schedulerObjects, controllerObjects, domainObjects, monitoringObjects, handoffObjects, spreadObjects,
			[]string{"Service pool-scheduler/pool-scheduler-handoff", "ServiceMonitor pool-scheduler/pool-scheduler-handoff"},
			[]string{"Service pool-scheduler/pool-scheduler-spread", "ServiceMonitor pool-scheduler/pool-scheduler-spread"},
			[]string{"FlowSchema pool-scheduler", "FlowSchema pool-scheduler-leader-election",
				"MutatingAdmissionPolicy pool-scheduler", "MutatingAdmissionPolicyBinding pool-scheduler", "MutatingAdmissionPolicyBinding pool-scheduler-listed"}),
		check: func(t *testing.T, r *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration) {
			if got := [2]any{cfg.ClientConnection.QPS, cfg.ClientConnection.Burst}; got != [2]any{float32(300.5), int32(1000000)} {
				t.Errorf("clientConnection qps, burst = %v, want [300.5 1000000] from values", got)
			}
			if args := containerArgs(t, r.get(t, "Deployment", "pool-scheduler")); !containsString(args, "--tls-min-version=VersionTLS13") {
				t.Errorf("scheduler args %q lack extraArgs", args)
			}
			want := []any{
				&config.NodePoolReadyArgs{
					PoolLabelKeys:         defaultPoolLabelKeys(),
					RequiredLabelKeys:     []string{"topology.pool-scheduler.io/update-domain"},
					PoolRequiredLabelKeys: map[string][]string{"gpu": {"nvidia.com/gpu.product"}},
					UnknownPoolPolicy:     config.UnknownPoolReject,
					LabelSetNamespaces:    []string{"pool-scheduler"},
					IgnoreDaemonSetPods:   false,
				},
				&config.SystemPoolGuardArgs{
					PoolLabelKeys:              defaultPoolLabelKeys(),
					SystemPools:                []string{},
					SystemNodeSelector:         &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.azure.com/mode": "system"}},
					SystemNamespaces:           []string{"kube-system", "monitoring"},
					SystemPriorityClasses:      []string{"system-cluster-critical", "system-node-critical"},
					SystemTolerationKeys:       []string{"CriticalAddonsOnly"},
					DaemonSetPodsAreSystemPods: false,
				},
				&config.DomainSpreadArgs{
					Dimensions: []config.SpreadDimension{
						{Name: "zone", LabelKeys: []string{"topology.kubernetes.io/zone"}},
						{Name: "fault-domain", LabelKeys: []string{"topology.kubernetes.azure.com/fault-domain"}, Joint: true},
					},
					Mode:                      config.SpreadHard,
					MaxSkew:                   2,
					SpreadPodsWithConstraints: true,
					RejectNodesMissingKeys:    true,
					DeletionCostAtBind:        true,
				},
			}
			var got []any
			for _, pc := range cfg.Profiles[0].PluginConfig {
				switch pc.Name {
				case "NodePoolReady", "SystemPoolGuard", "DomainSpread":
					got = append(got, pc.Args)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plugin args from values (-want +got):\n%s", diff)
			}
			if w := pluginWeight(cfg, "SystemPoolGuard"); w != 20 {
				t.Errorf("SystemPoolGuard weight = %d, want 20 from values", w)
			}
			policy := r.get(t, "ValidatingAdmissionPolicy", "pool-labeler-domain-own-node")
			vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
			if got, want := vars[0].(map[string]any)["expression"], "['topology.pool-scheduler.io/update-domain', 'topology.pool-scheduler.io/fault-domain']"; got != want {
				t.Errorf("admission policy ownKeys = %v, want %v", got, want)
			}
			checkMetricsTLS(t, r)
			args := containerArgs(t, r.get(t, "Deployment", "pool-labeler"))
			for _, want := range []string{"--hold-warning-after=10m", "--overwrite-conflicts=true",
				"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"} {
				if !containsString(args, want) {
					t.Errorf("labeler controller args %q lack %s from values", args, want)
				}
			}
		},
	}, {
		name:      "NodePoolLabelSets from the release namespace, others, or every one",
		namespace: "platform",
		want: concat(
			replaceNamespace(schedulerObjects, "platform"), replaceNamespace(controllerObjects, "platform"), replaceNamespace(domainObjects, "platform"),
			replaceNamespace(webhookObjects, "platform"), replaceNamespace(handoffObjects, "platform"), replaceNamespace(spreadObjects, "platform")),
		check: func(t *testing.T, r *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration) {
			checkLabelSetNamespaces(t, r, cfg, "platform")
			for values, want := range map[string][]string{
				`labelSets: {namespaces: [pipeline-system]}`:           {"pipeline-system"},
				`labelSets: {namespaces: [platform, pipeline-system]}`: {"platform", "pipeline-system"},
				`labelSets: {allNamespaces: true}`:                     nil,
			} {
				r, err := renderChart(t, "platform", values)
				if err != nil {
					t.Fatalf("rendering %s: %v", values, err)
				}
				cfg, err := r.schedulerConfig(t, "pool-scheduler-config")
				if err != nil {
					t.Fatal(err)
				}
				checkLabelSetNamespaces(t, r, cfg, want...)
			}
		},
	}, {
		name:   "Azure Monitor managed Prometheus",
		values: `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}}`,
		// The ServiceMonitors, a CA-only Secret and the add-on's Role in a namespace of their own.
		want: concat(schedulerObjects, controllerObjects, domainObjects, webhookObjects, handoffObjects, spreadObjects,
			[]string{"Service pool-scheduler/pool-labeler", "Service pool-scheduler/pool-scheduler", "Service pool-scheduler/pool-scheduler-handoff",
				"Secret pool-scheduler/pool-scheduler-metrics-ca-key", "Secret pool-scheduler/pool-scheduler-metrics-serving",
				"Service pool-scheduler/pool-scheduler-certs", "ServiceMonitor pool-scheduler-metrics/pool-scheduler-certs",
				"Role pool-scheduler-metrics/pool-scheduler-certs", "RoleBinding pool-scheduler-metrics/pool-scheduler-certs",
				"Namespace pool-scheduler-metrics", "Secret pool-scheduler-metrics/pool-scheduler-metrics-ca",
				"ServiceMonitor pool-scheduler-metrics/pool-labeler", "ServiceMonitor pool-scheduler-metrics/pool-scheduler",
				"ServiceMonitor pool-scheduler-metrics/pool-scheduler-handoff", "ServiceMonitor pool-scheduler-metrics/pool-scheduler-webhook",
				"Service pool-scheduler/pool-scheduler-spread", "ServiceMonitor pool-scheduler-metrics/pool-scheduler-spread",
				"Role pool-scheduler-metrics/pool-scheduler-ama-metrics", "RoleBinding pool-scheduler-metrics/pool-scheduler-ama-metrics"}),
		check: func(t *testing.T, r *renderedChart, _ *schedconfig.KubeSchedulerConfiguration) {
			checkMetricsTLS(t, r)
		},
	}, {
		// The events Role is bounded only by the events policy: without the policies it is not
		// rendered (the labeler then writes no Events, logs the refusal, and labels as usual).
		name:   "domain labeler without its admission policies: no events Role",
		values: `labeler: {domain: {admissionPolicy: {enabled: false}}}`,
		want: concat(schedulerObjects, controllerObjects, webhookObjects, handoffObjects, spreadObjects, []string{
			"ClusterRole pool-labeler-domain",
			"ClusterRoleBinding pool-labeler-domain",
			"DaemonSet pool-scheduler/pool-labeler-domain",
			"ServiceAccount pool-scheduler/pool-labeler-domain",
		}),
		check: func(t *testing.T, r *renderedChart, _ *schedconfig.KubeSchedulerConfiguration) {
			for _, o := range r.objects {
				if o.GetNamespace() == "default" || strings.Contains(o.GetName(), "events") {
					t.Errorf("%s rendered without the admission policies", objectID(o))
				}
			}
		},
	}, {
		name:   "labelers off",
		values: `{labeler: {controller: {enabled: false}, domain: {enabled: false}}, admission: {mode: none}, handoff: {handback: {enabled: false}}}`,
		want:   concat(schedulerObjects, handoffObjects, spreadObjects),
	}, {
		name:      "custom names, one replica, no leader election, no PDB, plugins off",
		namespace: "ops",
		values: `
scheduler:
  name: nodepools
  replicaCount: 1
  leaderElection: {enabled: false}
  podDisruptionBudget: {enabled: false}
  plugins: {nodePoolReady: {enabled: false}, systemPoolGuard: {enabled: false}, domainSpread: {enabled: false}}
admission: {mode: none}
handoff: {enabled: false}
labeler:
  controller: {enabled: false}
  domain:
    enabled: true
    faultDomainKey: ""
    updateDomainKey: topology.pool-scheduler.io/ud
`,
		want: []string{
			"ClusterRole nodepools",
			"ClusterRole nodepools-handback",
			"ClusterRole pool-labeler-domain",
			"ClusterRoleBinding nodepools",
			"ClusterRoleBinding nodepools-handback",
			"ClusterRoleBinding pool-labeler-domain",
			"ConfigMap ops/nodepools-config",
			"DaemonSet ops/pool-labeler-domain",
			"Deployment ops/nodepools",
			// Without leader election there is no hand-off controller, but the uninstall hook
			// still hands waiting pods back.
			"Job ops/nodepools-handback",
			"Role default/pool-labeler-domain",
			"RoleBinding default/pool-labeler-domain",
			"RoleBinding kube-system/nodepools:extension-apiserver-authentication-reader",
			"ServiceAccount ops/nodepools",
			"ServiceAccount ops/nodepools-handback",
			"ServiceAccount ops/pool-labeler-domain",
			"ValidatingAdmissionPolicy nodepools-handoff-deletes",
			"ValidatingAdmissionPolicy nodepools-pod-writes",
			"ValidatingAdmissionPolicy nodepools-volume-binding",
			"ValidatingAdmissionPolicy pool-labeler-domain-own-node",
			"ValidatingAdmissionPolicy pool-labeler-domain-own-node-events",
			"ValidatingAdmissionPolicyBinding nodepools-handoff-deletes",
			"ValidatingAdmissionPolicyBinding nodepools-pod-writes",
			"ValidatingAdmissionPolicyBinding nodepools-volume-binding",
			"ValidatingAdmissionPolicyBinding pool-labeler-domain-own-node",
			"ValidatingAdmissionPolicyBinding pool-labeler-domain-own-node-events",
		},
		check: func(t *testing.T, r *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration) {
			if cfg.LeaderElection.LeaderElect || cfg.Profiles[0].SchedulerName != "nodepools" {
				t.Errorf("leaderElect=%v schedulerName=%q, want false and nodepools", cfg.LeaderElection.LeaderElect, cfg.Profiles[0].SchedulerName)
			}
			for _, p := range []string{"NodePoolReady", "SystemPoolGuard", "DomainSpread"} {
				if pluginWeight(cfg, p) != 0 {
					t.Errorf("%s is enabled, want it off", p)
				}
			}
			policy := r.get(t, "ValidatingAdmissionPolicy", "pool-labeler-domain-own-node")
			conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
			if got, want := conds[0].(map[string]any)["expression"], "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith('pool-labeler-domain')"; got != want {
				t.Errorf("admission policy matches %v, want %v", got, want)
			}
			vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
			if got, want := vars[0].(map[string]any)["expression"], "['topology.pool-scheduler.io/ud']"; got != want {
				t.Errorf("admission policy ownKeys = %v, want %v", got, want)
			}
			// The scheduler's policies name its ServiceAccount: a wrong name would switch a
			// policy off without a word.
			for _, name := range []string{"nodepools-volume-binding", "nodepools-pod-writes"} {
				policy := r.get(t, "ValidatingAdmissionPolicy", name)
				conds, _, _ = unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
				if got, want := conds[0].(map[string]any)["expression"], "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith('nodepools')"; got != want {
					t.Errorf("%s matches %v, want %v", name, got, want)
				}
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.namespace
			if ns == "" {
				ns = chartNamespace
			}
			r, err := renderChart(t, ns, tt.values)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			if diff := cmp.Diff(tt.want, r.ids()); diff != "" {
				t.Errorf("rendered objects (-want +got):\n%s", diff)
			}
			// `helm install --create-namespace`: the namespace is real, everything else dry-run;
			// so are the namespaces the chart renders (helm creates them first).
			ensureNamespace(tCtx, t, cp, ns)
			for _, o := range r.objects {
				if o.GetKind() == "Namespace" {
					ensureNamespace(tCtx, t, cp, o.GetName())
				}
			}
			for _, crd := range r.crds {
				objs, err := decodeObjects(string(crd.File.Data))
				if err != nil {
					t.Fatalf("chart CRD %s: %v", crd.Filename, err)
				}
				for _, o := range objs {
					applier.apply(tCtx, t, o)
				}
			}
			for _, o := range r.objects {
				applier.apply(tCtx, t, o)
			}
			cfg, err := r.schedulerConfig(t, r.schedulerDeploymentName(t)+"-config")
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, r, cfg)
			}
		})
	}
}

// checkLabelSetNamespaces: the scheduler reads the NodePoolLabelSets of namespaces (none: every
// namespace), the labeler reads the scheduler's configuration (mounted from its ConfigMap) to
// get the same ones, and may write the status of sets there only.
func checkLabelSetNamespaces(t *testing.T, r *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration, namespaces ...string) {
	t.Helper()
	got := util.PluginArgs(t, &cfg.Profiles[0], "NodePoolReady").(*config.NodePoolReadyArgs).LabelSetNamespaces
	if diff := cmp.Diff(namespaces, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("scheduler labelSetNamespaces (-want +got):\n%s", diff)
	}
	var statusWriters []string
	for _, o := range r.objects {
		if strings.HasSuffix(o.GetName(), ":label-set-status") && (o.GetKind() == "RoleBinding" || o.GetKind() == "ClusterRoleBinding") {
			statusWriters = append(statusWriters, o.GetKind()+" "+o.GetNamespace())
		}
	}
	var want []string
	for _, ns := range namespaces {
		want = append(want, "RoleBinding "+ns)
	}
	if len(namespaces) == 0 {
		want = []string{"ClusterRoleBinding "}
	}
	if diff := cmp.Diff(want, statusWriters); diff != "" {
		t.Errorf("where the labeler may write NodePoolLabelSet status (-want +got):\n%s", diff)
	}
	labeler := r.get(t, "Deployment", "pool-labeler")
	args := containerArgs(t, labeler)
	if !containsString(args, "--config=/etc/pool-scheduler/config.yaml") {
		t.Errorf("labeler args %q do not read the scheduler's configuration", args)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--namespaces") || strings.HasPrefix(a, "--pool-label-keys") {
			t.Errorf("labeler arg %s: a second source for what the scheduler's configuration says", a)
		}
	}
	volumes, _, _ := unstructured.NestedSlice(labeler.Object, "spec", "template", "spec", "volumes")
	mounted := ""
	for _, v := range volumes {
		if name, ok, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); ok {
			mounted = name
		}
	}
	if want := r.schedulerDeploymentName(t) + "-config"; mounted != want {
		t.Errorf("labeler mounts ConfigMap %q, want the scheduler's %q", mounted, want)
	}
}

// replaceNamespace renames the namespace of "Kind namespace/name" ids.
func replaceNamespace(ids []string, namespace string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.Replace(id, " "+chartNamespace+"/", " "+namespace+"/", 1)
	}
	return out
}

// checkMatchesShippedConfig: with default values the chart's scheduler configuration is
// manifests/scheduler/config.yaml, after decoding and defaulting.
func checkMatchesShippedConfig(t *testing.T, _ *renderedChart, cfg *schedconfig.KubeSchedulerConfiguration) {
	shipped := util.LoadShippedConfigAsShipped(t)
	// values.yaml lists every arg, so empty lists and maps the shipped file leaves out are
	// rendered as [] and {}; for these args nil and empty mean the same (lists defaulted when
	// absent are already defaulted on both sides).
	if diff := cmp.Diff(shipped, cfg, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("default chart config differs from manifests/scheduler/config.yaml (-shipped +chart):\n%s", diff)
	}
}

// TestHelmChartRejectsBadValues: mistakes in values stop `helm install` (schema, template
// checks) or are caught by the scheduler's own args validation with the field named.
func TestHelmChartRejectsBadValues(t *testing.T) {
	tests := []struct {
		name    string
		values  string
		wantErr string
	}{
		{name: "unknown pool policy", values: `scheduler: {plugins: {nodePoolReady: {args: {unknownPoolPolicy: Sometimes}}}}`, wantErr: "unknownPoolPolicy"},
		{name: "misspelled plugin arg", values: `scheduler: {plugins: {nodePoolReady: {args: {requiredLabelKey: [a]}}}}`, wantErr: "requiredLabelKey"},
		{name: "spread mode", values: `scheduler: {plugins: {domainSpread: {args: {mode: Strict}}}}`, wantErr: "mode"},
		{name: "max skew zero", values: `scheduler: {plugins: {domainSpread: {args: {maxSkew: 0}}}}`, wantErr: "maxSkew"},
		{name: "misspelled labeler section", values: `labeler: {controler: {enabled: false}}`, wantErr: "controler"},
		{name: "both PDB budgets", values: `scheduler: {podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}}`, wantErr: "not both"},
		{name: "admission.namespaces lists the release namespace", values: `admission: {namespaces: [shop, pool-scheduler]}`, wantErr: "lists the release namespace pool-scheduler"},
		{name: "the release namespace listed, policy mode", values: `admission: {mode: policy, namespaces: [pool-scheduler]}`, wantErr: "lists the release namespace pool-scheduler"},
		{name: "invalid label key reaches args validation", values: `scheduler: {plugins: {domainSpread: {args: {dimensions: [{name: zone, labelKeys: ["not a key"]}]}}}}`, wantErr: "dimensions[0].labelKeys[0]"},
		{name: "no system nodes reaches args validation", values: `scheduler: {plugins: {systemPoolGuard: {args: {systemPools: [], systemNodeSelector: {}}}}}`, wantErr: "args.systemPools"},
		{name: "update domain required, domain labeler off", values: `{labeler: {domain: {enabled: false}}, scheduler: {plugins: {nodePoolReady: {args: {requiredLabelKeys: [topology.pool-scheduler.io/update-domain]}}}}}`, wantErr: "labeler.domain.enabled is false"},
		{name: "fault domain required for a pool, domain labeler off", values: `{labeler: {domain: {enabled: false}}, scheduler: {plugins: {nodePoolReady: {args: {poolRequiredLabelKeys: {user: [topology.pool-scheduler.io/fault-domain]}}}}}}`, wantErr: "topology.pool-scheduler.io/fault-domain"},
		{name: "client qps zero", values: `scheduler: {clientConnection: {qps: 0}}`, wantErr: "/scheduler/clientConnection/qps"},
		{name: "client qps a string", values: `scheduler: {clientConnection: {qps: fast}}`, wantErr: "/scheduler/clientConnection/qps"},
		{name: "client burst zero", values: `scheduler: {clientConnection: {burst: 0}}`, wantErr: "/scheduler/clientConnection/burst"},
		{name: "client burst fractional", values: `scheduler: {clientConnection: {burst: 1.5}}`, wantErr: "/scheduler/clientConnection/burst"},
		{name: "misspelled client setting", values: `scheduler: {clientConnection: {qsp: 100}}`, wantErr: "qsp"},
		{name: "client qps as a flag", values: `scheduler: {extraArgs: [--kube-api-qps=100]}`, wantErr: "set scheduler.clientConnection"},
		{name: "admission mode", values: `admission: {mode: always}`, wantErr: "/admission/mode"},
		// Nothing is handed over without an admission path: hand-back there is refused.
		{name: "hand-back without an admission path", values: `admission: {mode: none}`, wantErr: "handoff.handback.enabled needs an admission path"},
		{name: "policy with a two-requirement system selector", values: `{admission: {mode: policy}, scheduler: {plugins: {systemPoolGuard: {args: {systemNodeSelector: {matchLabels: {a: b, c: d}}}}}}}`, wantErr: "at most one requirement"},
		{name: "cert-manager without an issuer", values: `admission: {webhook: {certManager: {enabled: true}}}`, wantErr: "issuerRef"},
		{name: "client burst as a flag", values: `scheduler: {extraArgs: [--v=3, --kube-api-burst, "200"]}`, wantErr: "--kube-api-burst is ignored"},
		{name: "the 0.x labelSetNamespace", values: `scheduler: {plugins: {nodePoolReady: {args: {labelSetNamespace: pipeline-system}}}}`, wantErr: "--set 'labelSets.namespaces={pipeline-system}'"},
		{name: "the 0.x labelSetNamespace for every namespace", values: `scheduler: {plugins: {nodePoolReady: {args: {labelSetNamespace: ""}}}}`, wantErr: "labelSets.allNamespaces=true"},
		{name: "label-set namespaces and every namespace", values: `labelSets: {namespaces: [a], allNamespaces: true}`, wantErr: "not both"},
		{name: "invalid label-set namespace", values: `labelSets: {namespaces: [Pipeline_System]}`, wantErr: "/labelSets/namespaces/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderChart(t, chartNamespace, tt.values)
			if err == nil {
				_, err = r.schedulerConfig(t, "pool-scheduler-config")
			}
			if err == nil {
				t.Fatalf("values accepted, want an error mentioning %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error does not mention %q:\n%v", tt.wantErr, err)
			}
		})
	}
}

// TestHelmChartRBACMatchesManifests: the chart grants exactly what the kustomize manifests grant
// (same objects, rules, role references, subjects and admission policies, the optional
// system-pods policy included), so the least-privilege tests of manifests/ cover chart installs
// too.
func TestHelmChartRBACMatchesManifests(t *testing.T) {
	for _, line := range []string{"1.34", "1.36"} {
		t.Run(line, func(t *testing.T) { checkChartRBACMatchesManifests(t, line) })
	}
}

// checkChartRBACMatchesManifests compares the chart's RBAC for a release line with the
// manifests', the scheduler's ClusterRole as that line's overlay builds it.
func checkChartRBACMatchesManifests(t *testing.T, line string) {
	// The rebalancer on in its dry run: the manifests grant what it reads (the hand-off switch)
	// for an overlay that turns it on, and no eviction, as the chart does then.
	r, err := renderChart(t, chartNamespace, `{image: {line: "`+line+`"}, labeler: {domain: {enabled: true}}, scheduler: {plugins: {systemPoolGuard: {admissionPolicy: {enabled: true}}}}, spread: {rebalance: {enabled: true}}}`)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	// The line's overlay patches the scheduler's ClusterRole.
	resmap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(util.RepoRoot(), "manifests", "overlays", "k8s-"+line))
	if err != nil {
		t.Fatalf("kustomize build of the %s line's overlay: %v", line, err)
	}
	var lineRole *unstructured.Unstructured
	for _, res := range resmap.Resources() {
		if res.GetKind() == "ClusterRole" && res.GetName() == "pool-scheduler" {
			m, err := res.Map()
			if err != nil {
				t.Fatal(err)
			}
			lineRole = &unstructured.Unstructured{Object: m}
		}
	}
	if lineRole == nil {
		t.Fatalf("the %s line's overlay has no ClusterRole pool-scheduler", line)
	}
	kinds := map[string]bool{
		"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
		"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	}
	normalize := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range objs {
			// The uninstall hook's own account exists only in the chart (kustomize users run
			// poolctl handback themselves).
			if _, hook := o.GetAnnotations()["helm.sh/hook"]; !kinds[o.GetKind()] || hook {
				continue
			}
			c := o.DeepCopy()
			unstructured.RemoveNestedField(c.Object, "metadata", "labels")
			unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
			out[objectID(c)] = c.Object
		}
		return out
	}
	var manifests []*unstructured.Unstructured
	for _, f := range []string{"scheduler/rbac.yaml", "scheduler/admission-policy.yaml", "labeler/controller/rbac.yaml", "labeler/controller/admission-policy.yaml", "labeler/domain/rbac.yaml", "labeler/domain/admission-policy.yaml", "policies/system-pods/admission-policy.yaml", "admission/webhook/rbac.yaml", "admission/webhook/certs.yaml", "admission/webhook/admission-policy.yaml", "handoff/rbac.yaml", "handoff/admission-policy.yaml", "spread/rbac.yaml", "spread/admission-policy.yaml"} {
		data, err := os.ReadFile(filepath.Join(util.RepoRoot(), "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(string(data))
		if err != nil {
			t.Fatalf("manifests/%s: %v", f, err)
		}
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && o.GetName() == "pool-scheduler" {
				o = lineRole
			}
			manifests = append(manifests, o)
		}
	}
	want, got := normalize(manifests), normalize(r.objects)
	if len(want) == 0 {
		t.Fatal("no RBAC objects found in manifests/")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chart RBAC differs from manifests/ (-manifests +chart):\n%s", diff)
	}
}

// TestHelmChartDomainHostNetwork: labeler.domain.hostNetwork puts the domain DaemonSet into the
// node's network namespace (where pods cannot reach the metadata endpoint: AKS IMDS restriction)
// with the DNS policy that keeps cluster DNS; off by default. Either way the labeler may write
// Events about its node (namespace default), and the events policy names its ServiceAccount in
// the release namespace.
func TestHelmChartDomainHostNetwork(t *testing.T) {
	tests := []struct {
		name, namespace, values string
		wantHostNetwork         bool
		wantDNSPolicy           string
	}{
		{name: "default: pod network", namespace: chartNamespace},
		{name: "hostNetwork", namespace: "ops", values: `labeler: {domain: {hostNetwork: true}}`, wantHostNetwork: true, wantDNSPolicy: "ClusterFirstWithHostNet"},
		{name: "explicitly off", namespace: chartNamespace, values: `labeler: {domain: {hostNetwork: false}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderChart(t, tt.namespace, tt.values)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			ds := r.get(t, "DaemonSet", "pool-labeler-domain")
			hostNetwork, _, _ := unstructured.NestedBool(ds.Object, "spec", "template", "spec", "hostNetwork")
			dnsPolicy, _, _ := unstructured.NestedString(ds.Object, "spec", "template", "spec", "dnsPolicy")
			if hostNetwork != tt.wantHostNetwork || dnsPolicy != tt.wantDNSPolicy {
				t.Errorf("hostNetwork %v, dnsPolicy %q; want %v, %q", hostNetwork, dnsPolicy, tt.wantHostNetwork, tt.wantDNSPolicy)
			}

			var role *unstructured.Unstructured
			for _, o := range r.objects {
				if o.GetKind() == "Role" && o.GetNamespace() == "default" && o.GetName() == "pool-labeler-domain" {
					role = o
				}
			}
			if role == nil {
				t.Fatal("no Role default/pool-labeler-domain: the labeler could not write its node's events")
			}
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			want := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": []any{"create", "patch"}}}
			if diff := cmp.Diff(want, rules); diff != "" {
				t.Errorf("events Role rules (-want +got):\n%s", diff)
			}
			policy := r.get(t, "ValidatingAdmissionPolicy", "pool-labeler-domain-own-node-events")
			conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
			// By account name in any namespace (the policies bound the account wherever it runs).
			if got, want := conds[0].(map[string]any)["expression"], "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith('pool-labeler-domain')"; got != want {
				t.Errorf("events policy matches %v, want %v", got, want)
			}
		})
	}
	_, err := renderChart(t, chartNamespace, `labeler: {domain: {hostNetwork: "yes"}}`)
	if err == nil || !strings.Contains(err.Error(), "hostNetwork") {
		t.Errorf("hostNetwork: \"yes\" rendered (error %v), want the schema to refuse it", err)
	}
}

// TestHelmChartCRDsMatchManifests: the chart's crds/ folder is a copy of manifests/crds (kept by
// hack/update-codegen.sh), byte for byte, so the chart never installs a stale CRD.
func TestHelmChartCRDsMatchManifests(t *testing.T) {
	ch, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	chartCRDs := map[string][]byte{}
	for _, crd := range ch.CRDObjects() {
		chartCRDs[filepath.Base(crd.Filename)] = crd.File.Data
	}
	shipped, err := filepath.Glob(filepath.Join(util.RepoRoot(), "manifests", "crds", "*_*.yaml"))
	if err != nil || len(shipped) == 0 {
		t.Fatalf("no CRDs in manifests/crds (%v)", err)
	}
	for _, path := range shipped {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		got, ok := chartCRDs[name]
		switch {
		case !ok:
			t.Errorf("chart crds/ lacks %s: run make generate", name)
		case !bytes.Equal(want, got):
			t.Errorf("chart crds/%s differs from manifests/crds/%s: run make generate", name, name)
		}
		delete(chartCRDs, name)
	}
	for name := range chartCRDs {
		t.Errorf("chart crds/%s is not in manifests/crds: run make generate", name)
	}
}

// TestHelmChartValuesCoverPluginArgs: values.yaml lists every field of the v1 args types, with the
// default the args type gives it, so every arg is documented and settable from values.
func TestHelmChartValuesCoverPluginArgs(t *testing.T) {
	ch, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	plugins := ch.Values["scheduler"].(map[string]any)["plugins"].(map[string]any)
	for _, tt := range []struct {
		plugin string
		args   any // the v1 type, defaulted
	}{
		{plugin: "nodePoolReady", args: defaulted(&configv1.NodePoolReadyArgs{}, func(a *configv1.NodePoolReadyArgs) { configv1.SetDefaults_NodePoolReadyArgs(a) })},
		{plugin: "systemPoolGuard", args: defaulted(&configv1.SystemPoolGuardArgs{}, func(a *configv1.SystemPoolGuardArgs) { configv1.SetDefaults_SystemPoolGuardArgs(a) })},
		{plugin: "domainSpread", args: defaulted(&configv1.DomainSpreadArgs{}, func(a *configv1.DomainSpreadArgs) { configv1.SetDefaults_DomainSpreadArgs(a) })},
		{plugin: "nodePoolAffinity", args: defaulted(&configv1.NodePoolAffinityArgs{}, func(a *configv1.NodePoolAffinityArgs) { configv1.SetDefaults_NodePoolAffinityArgs(a) })},
	} {
		t.Run(tt.plugin, func(t *testing.T) {
			values, _ := plugins[tt.plugin].(map[string]any)["args"].(map[string]any)
			typ := reflect.TypeOf(tt.args).Elem()
			var fields []string
			for i := 0; i < typ.NumField(); i++ {
				name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
				// Where NodePoolLabelSets are read is the top-level labelSets value (an install
				// decision the labeler's RBAC follows); the 0.x labelSetNamespace is refused.
				if tt.plugin == "nodePoolReady" && (name == "labelSetNamespaces" || name == "labelSetNamespace") {
					continue
				}
				if name != "" {
					fields = append(fields, name)
				}
			}
			var keys []string
			for k := range values {
				keys = append(keys, k)
			}
			sort.Strings(fields)
			sort.Strings(keys)
			if diff := cmp.Diff(fields, keys); diff != "" {
				t.Errorf("values.yaml scheduler.plugins.%s.args keys differ from the fields of %s (-fields +values):\n%s", tt.plugin, typ.Name(), diff)
			}
			// Defaults: the values, decoded into the v1 type, equal the type's own defaults.
			data, err := yaml.Marshal(values)
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(typ).Interface()
			if err := yaml.UnmarshalStrict(data, got); err != nil {
				t.Fatalf("values do not decode into %s: %v", typ.Name(), err)
			}
			// A null systemNodeSelector is left out of the rendered config, so the type's default
			// (AKS system-mode pools) applies.
			if a, ok := got.(*configv1.SystemPoolGuardArgs); ok && a.SystemNodeSelector == nil {
				a.SystemNodeSelector = configv1.DefaultSystemNodeSelector()
			}
			if diff := cmp.Diff(tt.args, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("values.yaml defaults differ from %s defaults (-type +values):\n%s", typ.Name(), diff)
			}
		})
	}
}

func defaulted[T any](obj *T, setDefaults func(*T)) *T {
	setDefaults(obj)
	return obj
}

func defaultPoolLabelKeys() []string {
	a := &configv1.NodePoolReadyArgs{}
	configv1.SetDefaults_NodePoolReadyArgs(a)
	return a.PoolLabelKeys
}

func pluginWeight(cfg *schedconfig.KubeSchedulerConfiguration, name string) int32 {
	for _, p := range cfg.Profiles[0].Plugins.MultiPoint.Enabled {
		if p.Name == name {
			if p.Weight == 0 {
				return 1
			}
			return p.Weight
		}
	}
	return 0
}

func containerArgs(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func ensureNamespace(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, name string) {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// dryRunApplier server-side applies objects with dryRun=All and fieldValidation=Strict: the
// apiserver validates, defaults and admits them without storing anything.
type dryRunApplier struct {
	cp     *controlplane.ControlPlane
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newDryRunApplier(t *testing.T, cp *controlplane.ControlPlane) *dryRunApplier {
	t.Helper()
	return &dryRunApplier{cp: cp, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))}
}

func (a *dryRunApplier) apply(ctx context.Context, t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	gvk := o.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		t.Errorf("%s: the apiserver does not serve %s: %v", objectID(o), gvk, err)
		return
	}
	data, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	res := a.cp.Dynamic.Resource(mapping.Resource)
	var ri interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
	} = res
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			t.Errorf("%s: namespaced object without a namespace", objectID(o))
			return
		}
		ri = res.Namespace(o.GetNamespace())
	} else if o.GetNamespace() != "" {
		t.Errorf("%s: cluster-scoped object with a namespace", objectID(o))
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldManager:    "chart-test",
		Force:           &force,
		FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		t.Errorf("%s rejected by the apiserver: %v", objectID(o), err)
	}
}

// checkMetricsTLS: each ServiceMonitor verifies its endpoint's certificate (never
// insecureSkipVerify) with the CA bundle the certificate keeper writes to the serving Secret (or,
// Azure flavor, to a CA-only copy in the monitors' namespace), for a serverName the keeper's
// certificate names; the scheduler and the labelers serve that certificate. The chart renders
// both Secrets empty and never the CA key (issue #34): only the keeper's ServiceAccount may read
// or write the CA Secret, no pod mounts it, and the serving pods mount tls.crt and tls.key alone.
func checkMetricsTLS(t *testing.T, r *renderedChart) {
	t.Helper()
	const (
		serving = "pool-scheduler-metrics-serving"
		caKey   = "pool-scheduler-metrics-ca-key"
		keeper  = "pool-scheduler-certs"
	)
	for _, name := range []string{serving, caKey} {
		sec := r.getIn(t, "Secret", chartNamespace, name)
		if data, _, _ := unstructured.NestedMap(sec.Object, "data"); len(data) != 0 {
			t.Errorf("Secret %s: the chart renders data %v; the keeper alone writes it (an upgrade would reset it)", name, slices.Sorted(maps.Keys(data)))
		}
		if sd, _, _ := unstructured.NestedMap(sec.Object, "stringData"); len(sd) != 0 {
			t.Errorf("Secret %s: the chart renders stringData", name)
		}
	}
	// The keeper's arguments: its Secrets, and the names of every monitored Service.
	args := containerArgs(t, r.get(t, "Deployment", keeper))
	var dnsNames []string
	var caCopies []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--metrics-tls-dns-names="); ok {
			dnsNames = strings.Split(v, ",")
		}
		if v, ok := strings.CutPrefix(a, "--metrics-tls-ca-copy="); ok {
			caCopies = append(caCopies, v)
		}
	}
	for _, want := range []string{"certs", "--metrics-tls-ca-secret=" + caKey, "--metrics-tls-secret=" + serving} {
		if !containsString(args, want) {
			t.Errorf("keeper args %q lack %s", args, want)
		}
	}
	// Only the keeper's Role names the CA Secret, with get and update; no rule of the chart
	// grants Secrets without resourceNames in the release namespace.
	for _, o := range r.objects {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, rule := range rules {
			rm := rule.(map[string]any)
			resources, _, _ := unstructured.NestedStringSlice(rm, "resources")
			if !slices.Contains(resources, "secrets") && !slices.Contains(resources, "*") {
				continue
			}
			names, _, _ := unstructured.NestedStringSlice(rm, "resourceNames")
			verbs, _, _ := unstructured.NestedStringSlice(rm, "verbs")
			switch {
			case len(names) == 0 && (o.GetKind() == "ClusterRole" || o.GetNamespace() == chartNamespace):
				t.Errorf("%s grants %v on every Secret of the release namespace (the CA key is there)", objectID(o), verbs)
			case slices.Contains(names, caKey) && !(o.GetName() == keeper && o.GetNamespace() == chartNamespace):
				t.Errorf("%s grants %v on the CA Secret %s", objectID(o), verbs, caKey)
			case o.GetName() == keeper && o.GetNamespace() == chartNamespace:
				// Its metrics Secrets, and the webhook's when it keeps those too.
				others := slices.DeleteFunc(slices.Clone(names), func(n string) bool {
					return n == caKey || n == serving || n == "pool-scheduler-webhook-ca-key" || n == "pool-scheduler-webhook-tls"
				})
				if !slices.Contains(names, caKey) || !slices.Contains(names, serving) || len(others) > 0 || !slices.Equal(verbs, []string{"get", "update"}) {
					t.Errorf("keeper Role: %v on %v, want get, update on %s and %s (and the webhook's two)", verbs, names, caKey, serving)
				}
			}
		}
	}
	// No pod mounts the CA Secret; the serving Secret is mounted with tls.crt and tls.key only.
	mountsServing := map[string]bool{}
	for _, o := range r.objects {
		spec, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if !ok {
			continue
		}
		volumes, _, _ := unstructured.NestedSlice(spec, "volumes")
		for _, v := range volumes {
			vm := v.(map[string]any)
			if name, _, _ := unstructured.NestedString(vm, "secret", "secretName"); name == caKey {
				t.Errorf("%s mounts the CA Secret %s", objectID(o), caKey)
			} else if name == serving {
				mountsServing[o.GetName()] = true
				items, _, _ := unstructured.NestedSlice(vm, "secret", "items")
				var keys []string
				for _, it := range items {
					keys = append(keys, it.(map[string]any)["key"].(string))
				}
				if !slices.Equal(keys, []string{"tls.crt", "tls.key"}) {
					t.Errorf("%s mounts keys %v of %s, want tls.crt and tls.key alone (required: the pod waits for the keeper)", objectID(o), keys, serving)
				}
				if opt, _, _ := unstructured.NestedBool(vm, "secret", "optional"); opt {
					t.Errorf("%s mounts %s optional: it would start without a certificate", objectID(o), serving)
				}
			}
			if sources, ok, _ := unstructured.NestedSlice(vm, "projected", "sources"); ok {
				for _, src := range sources {
					if name, _, _ := unstructured.NestedString(src.(map[string]any), "secret", "name"); name == caKey {
						t.Errorf("%s projects the CA Secret %s", objectID(o), caKey)
					}
				}
			}
		}
		containers, _, _ := unstructured.NestedSlice(spec, "containers")
		for _, c := range containers {
			mounts, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
			for _, m := range mounts {
				if sp, _, _ := unstructured.NestedString(m.(map[string]any), "subPath"); sp != "" && m.(map[string]any)["name"] == "metrics-tls" {
					t.Errorf("%s mounts metrics-tls with subPath %s: a renewed certificate would never reach it", objectID(o), sp)
				}
			}
		}
	}
	// The webhook where the release runs it (admission.mode webhook).
	webhook := slices.Contains(r.ids(), "Deployment "+chartNamespace+"/pool-scheduler-webhook")
	servers := []string{"pool-scheduler", "pool-labeler", "pool-scheduler-handoff"}
	if webhook {
		servers = append(servers, "pool-scheduler-webhook")
	}
	for _, d := range servers {
		if !mountsServing[d] {
			t.Errorf("%s does not mount %s", d, serving)
		}
	}
	if mountsServing[keeper] {
		t.Errorf("the keeper mounts %s: it would wait for itself at first install", serving)
	}
	for _, name := range append(servers, "pool-scheduler-certs") {
		sm := r.get(t, "ServiceMonitor", name)
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, e := range endpoints {
			ep := e.(map[string]any)
			if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); skip {
				t.Errorf("ServiceMonitor %s skips certificate verification", name)
			}
			if scheme, _, _ := unstructured.NestedString(ep, "scheme"); scheme != "https" {
				t.Errorf("ServiceMonitor %s scheme = %q, want https", name, scheme)
			}
			caSecret, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
			serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
			// The serving Secret in the release namespace, or (Azure flavor) a CA-only copy in
			// the monitor's own namespace that the keeper writes.
			if sm.GetNamespace() == chartNamespace {
				if caSecret != serving {
					t.Errorf("ServiceMonitor %s: CA from %s, want %s", name, caSecret, serving)
				}
			} else if !slices.Contains(caCopies, sm.GetNamespace()+"/"+caSecret) {
				t.Errorf("ServiceMonitor %s: CA from %s/%s, which the keeper does not write (it writes %v)", name, sm.GetNamespace(), caSecret, caCopies)
			}
			if !slices.Contains(dnsNames, serverName) {
				t.Errorf("ServiceMonitor %s: serverName %q is not a name of the keeper's certificate %v", name, serverName, dnsNames)
			}
		}
	}
	if args := containerArgs(t, r.get(t, "Deployment", "pool-scheduler")); !containsString(args, "--tls-cert-file=/etc/pool-scheduler-tls/tls.crt") {
		t.Errorf("scheduler args %q: not serving the metrics certificate", args)
	}
	for _, d := range servers[1:] {
		if args := containerArgs(t, r.get(t, "Deployment", d)); !containsString(args, "--metrics-cert-dir=/etc/pool-labeler-tls") {
			t.Errorf("%s args %q: not serving the metrics certificate", d, args)
		}
	}
}

// installServiceMonitorCRD installs testdata/servicemonitor-crd.yaml: the prometheus-operator's
// monitoring.coreos.com/v1 ServiceMonitor reduced to the fields the chart sets (with the
// upstream types), so that strict field validation still catches a misspelled or mistyped field;
// and its copy in Azure Monitor's group azmonitoring.coreos.com.
func installServiceMonitorCRD(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "servicemonitor-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("servicemonitor-crd.yaml: %v", err)
	}
	// Azure Monitor managed service for Prometheus serves the same CRD under its own group
	// ("the same as OSS ... except for a change in the group name", Microsoft Learn,
	// prometheus-metrics-scrape-crd), with the label limits the chart sets for it (int64, as in
	// prometheus-operator's and Azure's CRDs).
	azure := crd.DeepCopy()
	azure.Spec.Group = "azmonitoring.coreos.com"
	azure.Name = azure.Spec.Names.Plural + "." + azure.Spec.Group
	for i := range azure.Spec.Versions {
		schema := azure.Spec.Versions[i].Schema.OpenAPIV3Schema
		spec := schema.Properties["spec"]
		for _, f := range []string{"labelLimit", "labelNameLengthLimit", "labelValueLengthLimit"} {
			spec.Properties[f] = apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}
		}
		schema.Properties["spec"] = spec
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := controlplane.ApplyCRDs(ctx, cp.Config, crd, azure); err != nil {
		t.Fatalf("installing the ServiceMonitor CRDs: %v", err)
	}
}

// TestHelmChartFlowSchema: API Priority and Fairness matches the scheduler's ServiceAccount by
// the built-in service-accounts FlowSchema (priority level workload-low), unlike kube-scheduler
// (workload-high); with scheduler.flowSchema.enabled its requests get workload-high and its Lease
// requests leader-election, as kube-scheduler's do. The apiserver names the FlowSchema and the
// priority level that matched a request in the X-Kubernetes-PF-* response headers.
func TestHelmChartFlowSchema(t *testing.T) {
	tCtx := ktesting.Init(t)
	cp := util.StartControlPlane(t)
	r, err := renderChart(t, chartNamespace, `scheduler: {flowSchema: {enabled: true}}`)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	ensureNamespace(tCtx, t, cp, chartNamespace)
	sa := r.get(t, "ServiceAccount", "pool-scheduler")
	if _, err := cp.Client.CoreV1().ServiceAccounts(chartNamespace).Create(tCtx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.GetName()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := util.ServiceAccountConfig(tCtx, t, cp, chartNamespace, sa.GetName(), nil)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// matched returns the names of the FlowSchema and the priority level that classified a GET of path.
	matched := func(path string) (string, string, error) {
		req, err := http.NewRequestWithContext(tCtx, http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			return "", "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", "", err
		}
		resp.Body.Close()
		fsUID := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
		plUID := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
		var fs, pl string
		schemas, err := cp.Client.FlowcontrolV1().FlowSchemas().List(tCtx, metav1.ListOptions{})
		if err != nil {
			return "", "", err
		}
		for _, s := range schemas.Items {
			if string(s.UID) == fsUID {
				fs = s.Name
			}
		}
		levels, err := cp.Client.FlowcontrolV1().PriorityLevelConfigurations().List(tCtx, metav1.ListOptions{})
		if err != nil {
			return "", "", err
		}
		for _, l := range levels.Items {
			if string(l.UID) == plUID {
				pl = l.Name
			}
		}
		return fs, pl, nil
	}
	requests := []struct {
		path string
		// want are FlowSchema and priority level without, then with, the chart's FlowSchemas.
		want, wantWith [2]string
	}{
		{path: "/api/v1/pods", want: [2]string{"service-accounts", "workload-low"}, wantWith: [2]string{"pool-scheduler", "workload-high"}},
		{path: "/api/v1/nodes", want: [2]string{"service-accounts", "workload-low"}, wantWith: [2]string{"pool-scheduler", "workload-high"}},
		{path: "/apis/coordination.k8s.io/v1/namespaces/pool-scheduler/leases/pool-scheduler", want: [2]string{"service-accounts", "workload-low"}, wantWith: [2]string{"pool-scheduler-leader-election", "leader-election"}},
	}
	// The apiserver's flow-control configuration follows the API objects asynchronously.
	waitClassified := func(path string, want [2]string) {
		t.Helper()
		var got [2]string
		err := wait.PollUntilContextTimeout(tCtx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			fs, pl, err := matched(path)
			if err != nil {
				return false, err
			}
			got = [2]string{fs, pl}
			return got == want, nil
		})
		if err != nil {
			t.Errorf("GET %s as the scheduler's ServiceAccount: matched FlowSchema, priority level = %v, want %v (%v)", path, got, want, err)
		}
	}
	for _, req := range requests {
		waitClassified(req.path, req.want)
	}
	for _, o := range r.objects {
		if o.GetKind() != "FlowSchema" {
			continue
		}
		if _, err := cp.Dynamic.Resource(flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas")).Create(tCtx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", objectID(o), err)
		}
	}
	for _, req := range requests {
		waitClassified(req.path, req.wantWith)
	}
}

// TestHelmChartKubeVersion: helm install refuses clusters that no release line serves (helm's
// own check, chartutil.IsCompatibleRange on Chart.yaml kubeVersion); TestHelmChartLines checks
// that range against the lines.
func TestHelmChartKubeVersion(t *testing.T) {
	ch, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{
		"v1.31.9": false, "v1.33.5": false, "v1.34.0": true, "v1.34.10": true, "v1.35.4": true,
		"v1.35.0-eks-1a2b3c": true, "v1.36.0": true, "v1.37.2-gke.1000": true, "v1.38.0": false, "v1.39.1": false,
	} {
		if got := chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, v); got != want {
			t.Errorf("Kubernetes %s: chart kubeVersion %q admits it: %v, want %v", v, ch.Metadata.KubeVersion, got, want)
		}
	}
}

// TestHelmChartLines: the chart runs the image of the release line that serves the cluster's
// Kubernetes minor (its own and the next: the version-skew policy), by the line's tag and digest,
// in every workload; image.line and image.tag override the choice; a cluster no line serves and
// an unknown line are refused with a message naming the lines. The chart's line table, its
// kubeVersion range and image.digests are checked against the lines the repository builds
// (hack/versions.env and lines/k8s-*/versions.env), so a new line cannot be half added.
func TestHelmChartLines(t *testing.T) {
	lines := releaselines.All(t)
	ch, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	app := ch.Metadata.AppVersion
	const repo = "ghcr.io/pool-scheduler/pool-scheduler"
	digest := func(line string) string { // one of its own per line
		sum := sha256.Sum256([]byte(line))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	digests := map[string]any{}
	for _, l := range lines {
		digests[l.Line] = digest(l.Line)
	}
	withDigests, err := yaml.Marshal(map[string]any{"image": map[string]any{"digests": digests}})
	if err != nil {
		t.Fatal(err)
	}

	// What the repository builds decides the chart's table, range and digests.
	wantServes := map[string][]string{}
	minMinor, maxMinor := 1<<30, 0
	for _, l := range lines {
		wantServes[l.Line] = []string{l.Line, fmt.Sprintf("1.%d", l.Minor+1)}
		minMinor, maxMinor = min(minMinor, l.Minor), max(maxMinor, l.Minor+1)
	}
	if want := fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", minMinor, maxMinor+1); ch.Metadata.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q (the minors the lines serve)", ch.Metadata.KubeVersion, want)
	}
	gotDigests, _, _ := unstructured.NestedMap(ch.Values, "image", "digests")
	if diff := cmp.Diff(slices.Sorted(maps.Keys(wantServes)), slices.Sorted(maps.Keys(gotDigests))); diff != "" {
		t.Errorf("values.yaml image.digests: one key per release line (-want +got):\n%s", diff)
	}

	type testCase struct {
		name, kube, values string
		want               string // the image every workload runs
		wantErr            string
	}
	var tests []testCase
	for _, l := range lines {
		for _, minor := range wantServes[l.Line] {
			tests = append(tests,
				testCase{name: "cluster " + minor + " without digests", kube: "v" + minor + ".3", want: repo + ":" + app + "-k8s" + l.Line},
				testCase{name: "cluster " + minor + " with the release's digests", kube: "v" + minor + ".3-eks-1a2b3c", values: string(withDigests),
					want: repo + ":" + app + "-k8s" + l.Line + "@" + digest(l.Line)})
		}
	}
	last := lines[len(lines)-1]
	tests = append(tests,
		testCase{name: "image.line overrides the cluster's", kube: "v" + lines[0].Line + ".1", values: `image: {line: "` + last.Line + `"}`, want: repo + ":" + app + "-k8s" + last.Line},
		testCase{name: "image.tag is used as is", kube: "v" + last.Line + ".0", values: `image: {tag: v9.9.9-dev, digests: {"` + last.Line + `": "` + digest(last.Line) + `"}}`, want: repo + ":v9.9.9-dev"},
		testCase{name: "a newer cluster than every line", kube: fmt.Sprintf("v1.%d.0", maxMinor+1), wantErr: "no pool-scheduler release line serves this cluster"},
		testCase{name: "an older cluster than every line", kube: fmt.Sprintf("v1.%d.5", minMinor-1), wantErr: "the lines are " + lines[0].Line + " (Kubernetes " + lines[0].Line},
		testCase{name: "an unknown line", values: `image: {line: "1.33"}`, kube: chartKube, wantErr: `image.line "1.33": there is no such release line`},
		testCase{name: "a malformed line", values: `image: {line: "136"}`, kube: chartKube, wantErr: "/image/line"},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := tt.values
			if values == "" {
				values = "{}"
			}
			r, err := renderChartFor(t, tt.kube, chartNamespace, values)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var workloads int
			for _, obj := range r.objects {
				containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
				for _, c := range containers {
					workloads++
					if got := c.(map[string]any)["image"]; got != tt.want {
						t.Errorf("%s %s runs %v, want %s", obj.GetKind(), obj.GetName(), got, tt.want)
					}
				}
			}
			if workloads < 3 {
				t.Errorf("%d containers rendered, want the scheduler's, the labelers' and the webhook's", workloads)
			}
		})
	}
}

// TestHelmChartMutatingAdmissionPolicyVersion: admission.mode=policy renders the
// MutatingAdmissionPolicy and its bindings in the version the cluster serves: v1 (GA in 1.36,
// where v1beta1 is off by default) when discovery lists it, else v1beta1 (1.34 and 1.35 with
// the API enabled).
func TestHelmChartMutatingAdmissionPolicyVersion(t *testing.T) {
	for _, tt := range []struct {
		kube        string
		apiVersions []string
		want        string
	}{
		{kube: "v1.34.10", want: "admissionregistration.k8s.io/v1beta1"},
		{kube: "v1.36.3", apiVersions: []string{"admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}, want: "admissionregistration.k8s.io/v1"},
	} {
		t.Run(tt.kube, func(t *testing.T) {
			r, err := renderChartFor(t, tt.kube, chartNamespace, `admission: {mode: policy, namespaces: [team-a]}`, tt.apiVersions...)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			for _, obj := range r.objects {
				if strings.HasPrefix(obj.GetKind(), "MutatingAdmissionPolicy") {
					n++
					if obj.GetAPIVersion() != tt.want {
						t.Errorf("%s %s: apiVersion %s, want %s", obj.GetKind(), obj.GetName(), obj.GetAPIVersion(), tt.want)
					}
				}
			}
			if n != 3 {
				t.Errorf("%d MutatingAdmissionPolicy objects, want the policy and its two bindings", n)
			}
		})
	}
}

// TestHelmChartAzureManagedPrometheus: monitoring.flavor azure-managed-prometheus renders the
// same ServiceMonitors as the default flavor (selectors, endpoints, TLS verification with the
// release's CA and serverName) in Azure Monitor's group azmonitoring.coreos.com/v1, with the
// label limits Azure asks for, in a namespace of their own that holds a Secret with the CA and
// nothing else: the add-on's ServiceAccount (kube-system/ama-metrics-serviceaccount) may get,
// list and watch Secrets there (its target allocator reads Secrets through a namespace-scoped
// informer from Kubernetes 1.37) and gets nothing in the release namespace, whose metrics TLS
// Secret holds the private key. A PrometheusRule is refused (Azure reads none), and the flavor
// is validated.
func TestHelmChartAzureManagedPrometheus(t *testing.T) {
	const (
		enabled      = `monitoring: {serviceMonitor: {enabled: true}}`
		azure        = `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}}`
		metricsNS    = chartNamespace + "-metrics"
		amaAccount   = "ama-metrics-serviceaccount"
		caOnlySecret = "pool-scheduler-metrics-ca"
	)
	def, err := renderChart(t, chartNamespace, enabled)
	if err != nil {
		t.Fatal(err)
	}
	az, err := renderChart(t, chartNamespace, azure)
	if err != nil {
		t.Fatal(err)
	}
	checkMetricsTLS(t, az)

	monitors := func(r *renderedChart) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range r.objects {
			if o.GetKind() == "ServiceMonitor" {
				out[o.GetName()] = o
			}
		}
		return out
	}
	defMonitors, azMonitors := monitors(def), monitors(az)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(defMonitors)), slices.Sorted(maps.Keys(azMonitors))); diff != "" {
		t.Errorf("ServiceMonitors of the Azure flavor (-default +azure):\n%s", diff)
	}
	if want := []string{"pool-labeler", "pool-scheduler", "pool-scheduler-certs", "pool-scheduler-handoff", "pool-scheduler-spread", "pool-scheduler-webhook"}; !slices.Equal(slices.Sorted(maps.Keys(azMonitors)), want) {
		t.Errorf("Azure ServiceMonitors %v, want %v", slices.Sorted(maps.Keys(azMonitors)), want)
	}
	limits := map[string]string{"labelLimit": "63", "labelNameLengthLimit": "511", "labelValueLengthLimit": "1023"}
	for name, sm := range azMonitors {
		if got := sm.GetAPIVersion(); got != "azmonitoring.coreos.com/v1" {
			t.Errorf("ServiceMonitor %s: apiVersion %s, want azmonitoring.coreos.com/v1", name, got)
		}
		if got := defMonitors[name].GetAPIVersion(); got != "monitoring.coreos.com/v1" {
			t.Errorf("default ServiceMonitor %s: apiVersion %s, want monitoring.coreos.com/v1", name, got)
		}
		if sm.GetNamespace() != metricsNS || defMonitors[name].GetNamespace() != chartNamespace {
			t.Errorf("ServiceMonitor %s in %s (default flavor: %s), want %s (%s)", name, sm.GetNamespace(), defMonitors[name].GetNamespace(), metricsNS, chartNamespace)
		}
		spec, _, _ := unstructured.NestedMap(sm.Object, "spec")
		defSpec, _, _ := unstructured.NestedMap(defMonitors[name].Object, "spec")
		for k, v := range limits {
			if got := fmt.Sprint(spec[k]); got != v {
				t.Errorf("ServiceMonitor %s: spec.%s = %s, want %s (Azure's templates)", name, k, got, v)
			}
			if _, ok := defSpec[k]; ok {
				t.Errorf("default ServiceMonitor %s sets spec.%s", name, k)
			}
			delete(spec, k)
		}
		// It selects the Services of the release namespace from its own.
		if diff := cmp.Diff(map[string]any{"matchNames": []any{chartNamespace}}, spec["namespaceSelector"]); diff != "" {
			t.Errorf("ServiceMonitor %s namespaceSelector (-want +got):\n%s", name, diff)
		}
		delete(spec, "namespaceSelector")
		// Its CA comes from the CA-only Secret, in its own namespace (where prometheus-operator's
		// asset store looks it up).
		endpoints, _, _ := unstructured.NestedSlice(spec, "endpoints")
		for i, e := range endpoints {
			ca, _, _ := unstructured.NestedMap(e.(map[string]any), "tlsConfig", "ca", "secret")
			if diff := cmp.Diff(map[string]any{"name": caOnlySecret, "key": "ca.crt"}, ca); diff != "" {
				t.Errorf("ServiceMonitor %s endpoint %d CA (-want +got):\n%s", name, i, diff)
			}
			_ = unstructured.SetNestedField(e.(map[string]any), "pool-scheduler-metrics-serving", "tlsConfig", "ca", "secret", "name")
		}
		spec["endpoints"] = endpoints
		// Everything else, endpoints and TLS included, is the default flavor's.
		if diff := cmp.Diff(defSpec, spec); diff != "" {
			t.Errorf("ServiceMonitor %s spec (-default +azure):\n%s", name, diff)
		}
		if diff := cmp.Diff(defMonitors[name].GetLabels(), sm.GetLabels()); diff != "" {
			t.Errorf("ServiceMonitor %s labels (-default +azure):\n%s", name, diff)
		}
	}

	// No private key where the add-on may read: every Secret its monitors name, and every Secret
	// of a namespace where it is granted anything.
	noKey := func(r *renderedChart, values, ns, name string) {
		t.Helper()
		sec := r.getIn(t, "Secret", ns, name)
		data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
		// Rendered empty when the certificate keeper writes it.
		if keys := slices.Sorted(maps.Keys(data)); len(keys) > 0 && !slices.Equal(keys, []string{"ca.crt"}) {
			t.Errorf("%s: Secret %s/%s the add-on reads holds %v, want ca.crt alone", values, ns, name, keys)
		}
		for k, v := range data {
			b, _ := base64.StdEncoding.DecodeString(v)
			if strings.Contains(string(b), "PRIVATE KEY") {
				t.Errorf("%s: Secret %s/%s key %s holds a private key", values, ns, name, k)
			}
		}
	}
	for _, sm := range azMonitors {
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, e := range endpoints {
			name, _, _ := unstructured.NestedString(e.(map[string]any), "tlsConfig", "ca", "secret", "name")
			noKey(az, azure, sm.GetNamespace(), name)
		}
	}
	if ns := az.get(t, "Namespace", metricsNS); ns.GetLabels()["app.kubernetes.io/instance"] != chartRelease {
		t.Errorf("Namespace %s labels %v, want the release's", metricsNS, ns.GetLabels())
	}

	// The add-on's grants: get, list and watch Secrets in the monitors' namespace (the informer
	// lists them), which holds nothing but the monitors, the CA-only Secret and the grant itself;
	// nothing in the release namespace, nothing on the metrics TLS Secret.
	checkGrants := func(values, wantNS string, wantSecrets []string) {
		t.Helper()
		r, err := renderChart(t, chartNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		var bound []string
		for _, b := range r.objects {
			if b.GetKind() != "RoleBinding" && b.GetKind() != "ClusterRoleBinding" {
				continue
			}
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			for _, s := range subjects {
				if s.(map[string]any)["name"] == amaAccount {
					bound = append(bound, objectID(b))
				}
			}
		}
		if want := []string{"RoleBinding " + wantNS + "/pool-scheduler-ama-metrics"}; !slices.Equal(bound, want) {
			t.Errorf("%s: bindings for %s %v, want %v", values, amaAccount, bound, want)
		}
		binding := r.getIn(t, "RoleBinding", wantNS, "pool-scheduler-ama-metrics")
		subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
		wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": amaAccount, "namespace": "kube-system"}}
		if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
			t.Errorf("%s: RoleBinding subjects (-want +got):\n%s", values, diff)
		}
		role := r.getIn(t, "Role", wantNS, "pool-scheduler-ama-metrics")
		if ref, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name"); ref != role.GetName() {
			t.Errorf("%s: RoleBinding refers to %q", values, ref)
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		wantRules := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get", "list", "watch"}}}
		if diff := cmp.Diff(wantRules, rules); diff != "" {
			t.Errorf("%s: Role rules (-want +got):\n%s", values, diff)
		}
		var inNS, secrets []string
		for _, o := range r.objects {
			if o.GetNamespace() == wantNS {
				inNS = append(inNS, o.GetKind())
				if o.GetKind() == "Secret" {
					secrets = append(secrets, o.GetName())
					noKey(r, values, wantNS, o.GetName())
				}
			}
		}
		if !slices.Equal(secrets, wantSecrets) {
			t.Errorf("%s: Secrets in %s %v, want %v", values, wantNS, secrets, wantSecrets)
		}
		for _, k := range inNS {
			if !slices.Contains([]string{"ServiceMonitor", "Secret", "Role", "RoleBinding"}, k) {
				t.Errorf("%s: a %s in %s, which should hold only the monitors, the CA and the grant", values, k, wantNS)
			}
		}
	}
	checkGrants(azure, metricsNS, []string{caOnlySecret})
	checkGrants(`monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}, azureManagedPrometheus: {namespace: scrape-ca, createNamespace: false}}`, "scrape-ca", []string{caOnlySecret})
	// Your own serving Secret (cert-manager): the monitors read a CA-only Secret you keep in
	// their namespace; the chart renders no Secret.
	own := `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}, azureManagedPrometheus: {caSecretName: scrape-ca}}`
	checkGrants(own, metricsNS, nil)
	if r, err := renderChart(t, chartNamespace, own); err != nil {
		t.Fatal(err)
	} else {
		for name, sm := range monitors(r) {
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			for _, e := range endpoints {
				if got, _, _ := unstructured.NestedString(e.(map[string]any), "tlsConfig", "ca", "secret", "name"); got != "scrape-ca" {
					t.Errorf("%s: ServiceMonitor %s CA from %q, want scrape-ca", own, name, got)
				}
			}
		}
	}
	if r, err := renderChart(t, chartNamespace, `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}, azureManagedPrometheus: {createNamespace: false}}`); err != nil {
		t.Fatal(err)
	} else {
		for _, o := range r.objects {
			if o.GetKind() == "Namespace" {
				t.Errorf("createNamespace false: rendered %s", objectID(o))
			}
		}
	}

	// Neither the Role nor the ServiceMonitors without the flavor or without ServiceMonitors.
	for _, values := range []string{enabled, `monitoring: {flavor: azure-managed-prometheus}`} {
		r, err := renderChart(t, chartNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range r.objects {
			if strings.HasSuffix(o.GetName(), "-ama-metrics") || strings.HasSuffix(o.GetName(), "-metrics-ca") || o.GetKind() == "Namespace" || o.GetAPIVersion() == "azmonitoring.coreos.com/v1" {
				t.Errorf("%s: rendered %s", values, objectID(o))
			}
		}
	}

	for _, tt := range []struct{ name, values, wantErr string }{
		{"PrometheusRule with the Azure flavor", `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}`, "reads no PrometheusRule"},
		{"unknown flavor", `monitoring: {flavor: azure, serviceMonitor: {enabled: true}}`, "/monitoring/flavor"},
		{"the release namespace for the add-on", `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}, azureManagedPrometheus: {namespace: pool-scheduler}}`, "must not be the release namespace"},
		{"own serving Secret without a CA-only Secret", `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true, tlsSecretName: scrape-tls}}`, "set monitoring.azureManagedPrometheus.caSecretName"},
		{"CA-only Secret without own serving Secret", `monitoring: {flavor: azure-managed-prometheus, serviceMonitor: {enabled: true}, azureManagedPrometheus: {caSecretName: scrape-ca}}`, "goes with monitoring.flavor azure-managed-prometheus and monitoring.serviceMonitor.tlsSecretName"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, chartNamespace, tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	// The default flavor still renders the PrometheusRule.
	r, err := renderChart(t, chartNamespace, `monitoring: {prometheusRule: {enabled: true}}`)
	if err != nil {
		t.Fatal(err)
	}
	if rule := r.get(t, "PrometheusRule", "pool-scheduler"); rule.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("PrometheusRule apiVersion %s", rule.GetAPIVersion())
	}
}

// TestHelmChartPDBsNeedTwoReplicas: a PodDisruptionBudget with minAvailable 1 over one replica
// would block every drain of its node, so the chart renders a workload's PDB only when it runs
// two or more replicas.
func TestHelmChartPDBsNeedTwoReplicas(t *testing.T) {
	for _, tt := range []struct {
		name, values, pdb string
	}{
		{name: "scheduler", values: `scheduler: {replicaCount: 1}`, pdb: "PodDisruptionBudget pool-scheduler/pool-scheduler"},
		{name: "labeler controller", values: `labeler: {controller: {replicaCount: 1}}`, pdb: "PodDisruptionBudget pool-scheduler/pool-labeler"},
		{name: "webhook", values: `admission: {webhook: {replicaCount: 1}}`, pdb: "PodDisruptionBudget pool-scheduler/pool-scheduler-webhook"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			two, err := renderChart(t, chartNamespace, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(two.ids(), tt.pdb) {
				t.Fatalf("with the default two replicas the chart renders no %s: %v", tt.pdb, two.ids())
			}
			one, err := renderChart(t, chartNamespace, tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(one.ids(), tt.pdb) {
				t.Errorf("with %s the chart renders %s, which would block drains of its node", tt.values, tt.pdb)
			}
		})
	}
}
