package release

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestInstallLabelerReadsSchedulerConfig: in install.yaml and in `kubectl apply -k manifests`
// the labeler's controller mounts the scheduler's ConfigMap under the name kustomize generated
// for it (a hash suffix), so the labeler reads the configuration the scheduler runs (its
// NodePoolReady args and labelSetNamespace).
func TestInstallLabelerReadsSchedulerConfig(t *testing.T) {
	for _, dirs := range [][]string{Bundles[0].Dirs, {"manifests"}} {
		t.Run(strings.Join(dirs, "+"), func(t *testing.T) { checkLabelerMountsSchedulerConfig(t, dirs) })
	}
}

func checkLabelerMountsSchedulerConfig(t *testing.T, dirs []string) {
	data, err := RenderBundle(repoRoot(), dirs, testImage)
	if err != nil {
		t.Fatal(err)
	}
	var configMap, mounted string
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		name, _ := nested(obj, "metadata", "name").(string)
		switch {
		case obj["kind"] == "ConfigMap" && strings.HasPrefix(name, "pool-scheduler-config"):
			configMap = name
		case obj["kind"] == "Deployment" && name == "pool-labeler":
			volumes, _ := nested(obj, "spec", "template", "spec", "volumes").([]any)
			for _, v := range volumes {
				if cm, ok := nested(v.(map[string]any), "configMap", "name").(string); ok {
					mounted = cm
				}
			}
		}
	}
	if configMap == "" || configMap == "pool-scheduler-config" || mounted != configMap {
		t.Errorf("the labeler mounts ConfigMap %q, the scheduler's generated ConfigMap is %q", mounted, configMap)
	}
}
