package image

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/integration/framework"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/pool-scheduler/pool-scheduler/internal/ociimage"
	"github.com/pool-scheduler/pool-scheduler/internal/release"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestRegistryRecipe follows the README's install recipe before any release exists, against
// go-containerregistry's registry in process (standing for ACR or any OCI registry): the line's
// image layout under test pushed as `hack/release push --layout ... --repository
// <registry>/pool-scheduler` pushes it (ociimage.Push); then the chart rendered with
// `--set image.repository=<registry>/pool-scheduler --set image.digests.<line>=<digest>` and the
// line's kustomize overlay under an overlay of one's own with the images: entry `kustomize edit
// set image ghcr.io/pool-scheduler/pool-scheduler=<registry>/pool-scheduler@<digest>` writes.
// Every container of both (hooks and init containers included) runs the pushed digest from the
// registry, the registry serves that digest, and the objects of each are applied to a kube-apiserver.
func TestRegistryRecipe(t *testing.T) {
	l := readLayout(t)
	digest, err := l.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-k8s(1\.\d+)$`).FindStringSubmatch(l.Tag)
	if m == nil {
		t.Fatalf("layout tag %q does not end in -k8s<line>", l.Tag)
	}
	line := m[1]

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	repo := u.Host + "/pool-scheduler"
	pushed, err := ociimage.Push(l, repo)
	if err != nil {
		t.Fatalf("push to %s: %v", repo, err)
	}
	if pushed.DigestStr() != digest.String() {
		t.Fatalf("pushed %s, the layout's index is %s", pushed, digest)
	}

	// The chart, as `helm install ... --set image.repository=... --set image.digests.<line>=...`
	// on a cluster of the line's minor.
	values := fmt.Sprintf(`{image: {repository: %q, digests: {%q: %q}}}`, repo, line, digest)
	chartObjs, _, err := util.RenderChart("v"+line+".0", "pool-scheduler", "pool-scheduler", values)
	if err != nil {
		t.Fatalf("rendering the chart with %s: %v", values, err)
	}
	// kustomize: an overlay of one's own over the line's.
	own := t.TempDir()
	base, err := filepath.Rel(own, filepath.Join(repoRoot(), release.LineOverlay(line)))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n- name: ghcr.io/pool-scheduler/pool-scheduler\n  newName: %s\n  digest: %s\n",
		base, repo, digest)
	if err := os.WriteFile(filepath.Join(own, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resmap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), own)
	if err != nil {
		t.Fatalf("kustomize build of an overlay over %s: %v", base, err)
	}
	rendered, err := resmap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	kustomizeObjs, err := util.DecodeObjects(string(rendered))
	if err != nil {
		t.Fatal(err)
	}

	// Every container runs the pushed digest from the registry, and the registry serves it.
	served := map[string]bool{}
	for source, objs := range map[string][]*unstructured.Unstructured{"chart": chartObjs, "kustomize": kustomizeObjs} {
		var containers int
		for _, o := range objs {
			for _, img := range release.ContainerImages(o.Object) {
				containers++
				ref, err := name.NewDigest(img)
				if err != nil || ref.Context().String() != repo || ref.DigestStr() != digest.String() {
					t.Errorf("%s: %s %s runs %s, want %s[:tag]@%s", source, o.GetKind(), o.GetName(), img, repo, digest)
					continue
				}
				served[img] = true
			}
		}
		if containers == 0 {
			t.Errorf("%s renders no container", source)
		}
	}
	imgs := make([]string, 0, len(served))
	for img := range served {
		imgs = append(imgs, img)
	}
	sort.Strings(imgs)
	for _, img := range imgs {
		ref, _ := name.NewDigest(img)
		desc, err := remote.Head(ref)
		if err != nil {
			t.Errorf("the registry does not serve %s: %v", img, err)
		} else if desc.Digest != digest {
			t.Errorf("%s: the registry serves %s", img, desc.Digest)
		}
	}

	// Applied as installed: each to a kube-apiserver of its own (the chart and the overlay
	// install the same objects, which one cluster holds once), the chart's into its release
	// namespace as `helm install --create-namespace` makes it.
	tCtx := ktesting.Init(t)
	framework.StartEtcd(klog.NewKlogr(), t, true)
	apply(tCtx, t, util.StartControlPlane(t), kustomizeObjs)
	cp := util.StartControlPlane(t)
	if _, err := cp.Client.CoreV1().Namespaces().Create(tCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(tCtx, t, cp, chartObjs)
}

// apply server-side applies objs to cp, as `kubectl apply --server-side`.
func apply(tCtx ktesting.TContext, t *testing.T, cp *controlplane.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	mapper, err := util.RESTMapper(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Dynamic.Resource(m.Resource).Namespace(o.GetNamespace()).Patch(tCtx, o.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "recipe", Force: ptr.To(true)}); err != nil {
			t.Errorf("applying %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}
