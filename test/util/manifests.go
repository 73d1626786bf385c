package util

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
)

// KustomizeObjects returns the objects of the files a kustomization.yaml in dir lists under
// resources, following directories (their kustomization.yaml) recursively, in order. Generators
// and patches are not applied.
func KustomizeObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s/kustomization.yaml: %v", dir, err)
		}
		if st.IsDir() {
			out = append(out, KustomizeObjects(t, path)...)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", path, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			out = append(out, u)
		}
	}
	return out
}

// accessObjects are the kinds ApplyAccessObjects creates, with their resources.
var accessObjects = map[string]schema.GroupVersionResource{
	"Namespace":                        {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":                   {Version: "v1", Resource: "serviceaccounts"},
	"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
}

// skippedKinds are the workloads (the test runs the binaries itself) and the CRD (installed by
// the control plane from the same files).
var skippedKinds = map[string]bool{"Deployment": true, "DaemonSet": true, "CustomResourceDefinition": true}

// ApplyAccessObjects creates the namespaces, service accounts, RBAC objects and admission
// policies among objs, exactly as written, and returns what it created by kind. Any other kind
// than those and skippedKinds fails the test, so nothing shipped is silently left out.
func ApplyAccessObjects(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	applied := map[string][]string{}
	for _, u := range objs {
		kind := u.GetKind()
		if skippedKinds[kind] {
			continue
		}
		gvr, ok := accessObjects[kind]
		if !ok {
			t.Fatalf("manifest object %s %s: kind not handled by ApplyAccessObjects", kind, u.GetName())
		}
		var err error
		if u.GetNamespace() != "" {
			_, err = cp.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
		} else {
			_, err = cp.Dynamic.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil && !(kind == "Namespace" && apierrors.IsAlreadyExists(err)) {
			t.Fatalf("creating %s %s/%s: %v", kind, u.GetNamespace(), u.GetName(), err)
		}
		applied[kind] = append(applied[kind], u.GetNamespace()+"/"+u.GetName())
	}
	return applied
}

// ServiceAccountConfig returns a client config for the control plane that authenticates with a
// token for the service account from the TokenRequest API (bound to pod, if not nil, which puts
// the pod's node into the token), and a kubeconfig file with it.
func ServiceAccountConfig(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, namespace, name string, pod *v1.Pod) (*rest.Config, string) {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = tr.Status.Token
	path := filepath.Join(t.TempDir(), fmt.Sprintf("kubeconfig-%s", name))
	if err := controlplane.WriteKubeconfig(cfg, path); err != nil {
		t.Fatal(err)
	}
	return cfg, path
}

// RESTMapper maps kinds to resources by the control plane's discovery, as kubectl does: a kind
// of an API version the server does not serve has no mapping (meta.IsNoMatchError).
func RESTMapper(cp *controlplane.ControlPlane) (meta.RESTMapper, error) {
	groups, err := restmapper.GetAPIGroupResources(cp.Client.Discovery())
	if err != nil {
		return nil, err
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

// CreateObjects creates objs through the API server's discovery (RESTMapper), so an object of an
// API version the server does not serve fails with a no-match error.
func CreateObjects(ctx context.Context, cp *controlplane.ControlPlane, objs []*unstructured.Unstructured) error {
	mapper, err := RESTMapper(cp)
	if err != nil {
		return err
	}
	for _, u := range objs {
		gvk := schema.FromAPIVersionAndKind(u.GetAPIVersion(), u.GetKind())
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		if _, err := cp.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
