package util

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ChartDir is the Helm chart's directory.
func ChartDir() string {
	return filepath.Join(RepoRoot(), "manifests", "charts", "pool-scheduler")
}

// BudgetFloorPolicy names the budget floor's ValidatingAdmissionPolicy and its binding in the
// chart: without the release, since the floor is one per cluster.
const BudgetFloorPolicy = "pool-scheduler-budget-floor"

// RenderChart renders the chart as `helm install` would for release in namespace, with values
// (YAML, merged over values.yaml), for a cluster of Kubernetes version kube
// (.Capabilities.KubeVersion) serving apiVersions besides the defaults: schema validation,
// strict templates (a missing value is an error), without helm's kubeVersion check. It returns
// the objects of every template (hooks included) and the chart's CRDs.
func RenderChart(kube, release, namespace, values string, apiVersions ...string) ([]*unstructured.Unstructured, []chart.CRD, error) {
	ch, err := loader.Load(ChartDir())
	if err != nil {
		return nil, nil, fmt.Errorf("loading chart: %w", err)
	}
	overrides, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		return nil, nil, fmt.Errorf("values: %w", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kube)
	if err != nil {
		return nil, nil, err
	}
	caps.KubeVersion = *kv
	caps.APIVersions = append(slices.Clone(caps.APIVersions), apiVersions...)
	vals, err := chartutil.ToRenderValues(ch, overrides, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return nil, nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		if filepath.Ext(name) != ".yaml" {
			continue // _helpers.tpl, NOTES.txt
		}
		o, err := DecodeObjects(files[name])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w\n%s", name, err, files[name])
		}
		objs = append(objs, o...)
	}
	return objs, ch.CRDObjects(), nil
}

// DecodeObjects decodes a multi-document YAML (or JSON) stream, skipping empty documents.
func DecodeObjects(data string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(data), 4096)
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}
