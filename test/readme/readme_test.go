package readme

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/test/integration/framework"
	"sigs.k8s.io/yaml"

	"github.com/pool-scheduler/pool-scheduler/internal/release"
	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

func TestMain(m *testing.M) {
	framework.EtcdMain(m.Run)
}

// The files whose shell blocks a user copies.
var readmes = []string{"README.md", "manifests/charts/pool-scheduler/README.md"}

const (
	crdName = "nodepoollabelsets.labels.banzaicloud.io"
	// The chart's and the overlays' image, as a checkout names it before a release.
	shippedRepo = "ghcr.io/pool-scheduler/pool-scheduler"
)

// cluster is what a scenario's blocks run against, and what the checks read.
type cluster struct {
	name string
	cp   *controlplane.ControlPlane
}

// scenario runs blocks, in order, against one cluster a user brings (setup), then checks what
// they installed.
type scenario struct {
	name   string
	blocks []string
	setup  func(ctx context.Context, t *testing.T, c *cluster)
	check  func(ctx context.Context, t *testing.T, c *cluster, r *recipe)
}

// recipe is what the README's recipe pushed: the repository and the digest of the test
// cluster's line, read from the values file the push wrote.
type recipe struct {
	repo, digest string
}

var scenarios = []scenario{
	{name: "recipe-helm", blocks: []string{"recipe-build", "recipe-helm"}, setup: freshCluster, check: checkPushed("chart from the checkout")},
	{name: "recipe-oci", blocks: []string{"recipe-oci"}, setup: freshCluster, check: checkPushed("chart from the registry")},
	{name: "recipe-kustomize", blocks: []string{"recipe-kustomize"}, setup: freshCluster, check: checkPushed("own kustomize overlay")},
	{name: "checkout-overlay", blocks: []string{"checkout-overlay"}, setup: freshCluster, check: checkImages("1.36")},
	{name: "checkout-helm", blocks: []string{"checkout-helm", "opt-in"}, setup: freshCluster, check: checkImages("")},
	{name: "crd-upgrade", blocks: []string{"checkout-helm", "crd-upgrade"}, setup: previousCRD, check: checkCRDUpgraded},
	{name: "chart", blocks: []string{"chart-install", "chart-template", "chart-required-keys", "chart-operator-sets"}, setup: freshCluster, check: checkChartValues},
}

// testLine is the release line of the test's kube-apiserver, which the chart picks (its minor:
// the default line's Kubernetes, or a line's); TestReadme sets it.
var testLine string

// TestReadme runs every marked shell block of the READMEs verbatim, scenario by scenario, in one
// bash (set -euo pipefail) from the repository's root, so that variables set by one block reach
// the next as they do in a user's terminal. What differs from a user's run: REG (the registry
// in process), LINE (the test cluster's line), KUBECONFIG (one kube-apiserver per scenario,
// set between scenarios) and `az`, a stand-in on PATH that prints a token.
func TestReadme(t *testing.T) {
	ctx := context.Background()
	root := util.RepoRoot()
	blocks := allBlocks(t, root)
	for _, dir := range []string{"my-install"} {
		if _, err := os.Stat(filepath.Join(root, dir)); err == nil {
			t.Fatalf("%s exists in the checkout: the README's recipe writes it; move it away first", dir)
		}
		t.Cleanup(func() { os.RemoveAll(filepath.Join(root, dir)) })
	}

	reg := startRegistry(t)
	env := scriptEnv(t, reg)
	testLine = serverLine(t, util.StartControlPlane(t))

	var script strings.Builder
	var origins []origin
	clusters := make([]*cluster, len(scenarios))
	for i, sc := range scenarios {
		c := &cluster{name: sc.name, cp: util.StartControlPlane(t)}
		sc.setup(ctx, t, c)
		clusters[i] = c
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := controlplane.WriteKubeconfig(c.cp.Config, kubeconfig); err != nil {
			t.Fatal(err)
		}
		writeLines(&script, &origins, origin{what: "scenario " + sc.name + " (the test's)"},
			fmt.Sprintf("# scenario %s\nexport KUBECONFIG=%s\n", sc.name, kubeconfig))
		for _, name := range sc.blocks {
			b := blocks[name]
			text, done := Substitute(b.Text, map[string]string{"REG": reg.host, "LINE": testLine})
			if name == "recipe-build" && (!done["REG"] || !done["LINE"]) {
				t.Fatalf("%s:%d: the recipe no longer sets REG= and LINE= at the start of a line (set: %v); TestReadme substitutes those", b.File, b.Line, done)
			}
			writeLines(&script, &origins, origin{file: b.File, line: b.Line, what: name}, text)
		}
	}

	out, err := runScript(t, root, env, script.String())
	if err != nil {
		t.Fatalf("%v\n%s", failedAt(err, out, origins), tail(out, 60))
	}
	t.Logf("the READMEs' blocks ran:\n%s", tail(out, 20))

	r := pushedRecipe(t, root, reg)
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.check(ctx, t, clusters[i], r) })
	}
}

// TestReadmePlantedError: the runner fails on a shell error in a block, here the one the chart's
// README once had: an unquoted --set key with an escaped dot, which the shell unescapes into
// nested keys that the chart's schema refuses.
func TestReadmePlantedError(t *testing.T) {
	root := util.RepoRoot()
	blocks := allBlocks(t, root)
	cp := util.StartControlPlane(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(cp.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	b := blocks["checkout-helm"]
	planted := strings.Replace(b.Text, "--create-namespace", `--create-namespace --set image.digests.1\.34=sha256:0000000000000000000000000000000000000000000000000000000000000000`, 1)
	if planted == b.Text {
		t.Fatalf("%s:%d: no --create-namespace in the block to plant the error beside", b.File, b.Line)
	}
	var script strings.Builder
	var origins []origin
	writeLines(&script, &origins, origin{what: "the test's"}, "export KUBECONFIG="+kubeconfig+"\n")
	writeLines(&script, &origins, origin{file: b.File, line: b.Line, what: "checkout-helm, planted"}, planted)
	out, err := runScript(t, root, scriptEnv(t, nil), script.String())
	if err == nil {
		t.Fatalf("the block with an unquoted --set key ran without an error:\n%s", tail(out, 30))
	}
	where := failedAt(err, out, origins)
	if !strings.Contains(where, b.File+":"+strconv.Itoa(b.Line)) {
		t.Errorf("the failure is reported at %q, want %s:%d", where, b.File, b.Line)
	}
	if !strings.Contains(out, "digests") {
		t.Errorf("helm's error does not name the digests value:\n%s", tail(out, 30))
	}
	t.Logf("planted error refused as expected: %s\n%s", where, tail(out, 5))
}

// TestParseBlocks: the marks are read as documented, and a block without one is refused.
func TestParseBlocks(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "x.md")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("# t\n\n<!-- readme-test: run a -->\n```sh\necho a\n```\n\n```yaml\nk: v\n```\n<!-- readme-test: skip: needs AKS -->\n```sh\naz aks\n```\n")
	got, err := ParseBlocks(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{{File: p, Line: 5, Name: "a", Text: "echo a\n"}, {File: p, Line: 13, Skip: "needs AKS", Text: "az aks\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseBlocks = %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"```sh\necho unmarked\n```\n",
		"<!-- readme-test: skip: -->\n```sh\necho no reason\n```\n",
		"<!-- readme-test: run -->\n```sh\necho no name\n```\n",
		"<!-- readme-test: run a -->\n```sh\necho open\n",
	} {
		if _, err := ParseBlocks(write(bad)); err == nil {
			t.Errorf("ParseBlocks accepted %q", bad)
		}
	}
	text, done := Substitute("REG=myregistry.azurecr.io  # yours\necho $REG\nLINE=1.36\n", map[string]string{"REG": "127.0.0.1:5000", "LINE": "1.34"})
	if want := "REG=127.0.0.1:5000  # yours\necho $REG\nLINE=1.34\n"; text != want || !done["REG"] || !done["LINE"] {
		t.Errorf("Substitute = %q %v, want %q", text, done, want)
	}
}

// allBlocks parses the READMEs and returns their run blocks by name, checking every block is
// marked, every name is used once and every run block is in a scenario.
func allBlocks(t *testing.T, root string) map[string]Block {
	t.Helper()
	byName := map[string]Block{}
	for _, f := range readmes {
		bs, err := ParseBlocks(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			b.File = f
			if b.Name == "" {
				continue
			}
			if prev, dup := byName[b.Name]; dup {
				t.Fatalf("%s:%d: block name %q is used at %s:%d too", b.File, b.Line, b.Name, prev.File, prev.Line)
			}
			byName[b.Name] = b
		}
	}
	used := map[string]bool{}
	for _, sc := range scenarios {
		for _, n := range sc.blocks {
			if _, ok := byName[n]; !ok {
				t.Fatalf("scenario %s runs block %q, which no README marks", sc.name, n)
			}
			used[n] = true
		}
	}
	for n, b := range byName {
		if !used[n] {
			t.Errorf("%s:%d: block %q is marked to run, but no scenario of TestReadme runs it", b.File, b.Line, n)
		}
	}
	return byName
}

// origin is where a run of script lines comes from.
type origin struct {
	file string
	line int
	what string
	// first is the script's line (1-based) where this run starts.
	first int
}

func writeLines(script *strings.Builder, origins *[]origin, o origin, text string) {
	o.first = strings.Count(script.String(), "\n") + 1
	*origins = append(*origins, o)
	script.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		script.WriteString("\n")
	}
}

var failedLineRE = regexp.MustCompile(`readme-test: failed at script line (\d+)`)

// failedAt names the README line where the script stopped, from the ERR trap's report.
func failedAt(err error, out string, origins []origin) string {
	m := failedLineRE.FindAllStringSubmatch(out, -1)
	if m == nil {
		return fmt.Sprintf("the READMEs' blocks failed (%v), at a line the trap did not report", err)
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	n -= preambleLines
	for i := len(origins) - 1; i >= 0; i-- {
		o := origins[i]
		if n >= o.first {
			if o.file == "" {
				return fmt.Sprintf("failed (%v) in %s", err, o.what)
			}
			return fmt.Sprintf("failed (%v) at %s:%d (block %s)", err, o.file, o.line+n-o.first, o.what)
		}
	}
	return fmt.Sprintf("failed (%v) at script line %d", err, n)
}

// The script's preamble: strict mode and the trap that reports the failing line. A trap's
// $LINENO inside a multi-line command is that command's last line, so a block's continued
// command is reported at its end.
const preamble = "set -euo pipefail\ntrap 'echo \"readme-test: failed at script line $LINENO\" >&2' ERR\n"

var preambleLines = strings.Count(preamble, "\n")

func runScript(t *testing.T, root string, env []string, script string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "readme.sh")
	if err := os.WriteFile(path, []byte(preamble+script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Dir = root
	cmd.Env = env
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// scriptEnv is the environment the blocks run in: the test's, without make's and the test
// build's settings (a user's shell has neither), with helm and kubectl from bin/ and the `az`
// stand-in first on PATH, Helm's and Docker's configuration in a temporary directory, and the
// registry's CA trusted (SSL_CERT_FILE: the system's bundle and that CA).
func scriptEnv(t *testing.T, reg *testRegistry) []string {
	t.Helper()
	dir := t.TempDir()
	stub := filepath.Join(dir, "bin")
	if err := os.MkdirAll(stub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stub, "az"), []byte(azStub), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(util.RepoRoot(), "bin")
	for _, tool := range []string{"helm", "kubectl"} {
		if _, err := os.Stat(filepath.Join(tools, tool)); err != nil {
			t.Fatalf("bin/%s: %v (make helm kubectl builds them; make readme-test runs this test)", tool, err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "MAKEFLAGS", k == "MAKELEVEL", k == "MFLAGS", k == "MAKEOVERRIDES", k == "GOFLAGS", k == "PATH",
			k == "KUBECONFIG", k == "SSL_CERT_FILE", k == "SSL_CERT_DIR", k == "DOCKER_CONFIG", strings.HasPrefix(k, "HELM_"):
		default:
			env = append(env, kv)
		}
	}
	env = append(env,
		"PATH="+stub+":"+tools+":"+os.Getenv("PATH"),
		// The build flags of `make binaries` as a user's shell has them (make readme-test passes
		// its own, without the test build's), so make image reuses the build cache.
		"GOFLAGS="+os.Getenv("README_TEST_GOFLAGS"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "helm", "config"),
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm", "cache"),
		"HELM_DATA_HOME="+filepath.Join(dir, "helm", "data"),
		"DOCKER_CONFIG="+filepath.Join(dir, "docker"),
	)
	if reg != nil {
		env = append(env, "SSL_CERT_FILE="+reg.caBundle)
	}
	return env
}

// azStub stands for the Azure CLI in `az acr login --name <registry> --expose-token --output tsv
// --query accessToken` (learn.microsoft.com/azure/container-registry/container-registry-authentication,
// "az acr login with --expose-token"): it prints an access token, and refuses anything else.
const azStub = `#!/usr/bin/env bash
set -euo pipefail
args="$*"
[[ "$1 $2" == "acr login" && " $args " == *" --expose-token "* && " $args " == *" --output tsv "* && " $args " == *" --query accessToken "* && " $args " == *" --name "* ]] \
  || { echo "az (TestReadme's stand-in) stands only for 'az acr login --name <registry> --expose-token --output tsv --query accessToken', got: az $args" >&2; exit 2; }
echo test-access-token
`

type testRegistry struct {
	host     string
	caBundle string
}

// startRegistry serves go-containerregistry's registry over TLS (Helm uses https for every
// registry but localhost), with a CA bundle that trusts it beside the system's CAs.
func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	srv := httptest.NewUnstartedServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var bundle []byte
	for _, sys := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if b, err := os.ReadFile(sys); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})...)
	path := filepath.Join(t.TempDir(), "ca-bundle.pem")
	if err := os.WriteFile(path, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	return &testRegistry{host: u.Host, caBundle: path}
}

// pushedRecipe reads the values file the recipe's push wrote and checks the registry serves the
// digest it names for the test cluster's line.
func pushedRecipe(t *testing.T, root string, reg *testRegistry) *recipe {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "_output", "image-values.yaml"))
	if err != nil {
		t.Fatalf("the recipe's values file: %v", err)
	}
	var v struct {
		Image struct {
			Repository string            `json:"repository"`
			Digests    map[string]string `json:"digests"`
		} `json:"image"`
	}
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("the recipe's values file: %v\n%s", err, data)
	}
	r := &recipe{repo: v.Image.Repository, digest: v.Image.Digests[testLine]}
	if r.repo != reg.host+"/pool-scheduler" || r.digest == "" {
		t.Fatalf("the recipe's values file names %s and digests %v, want %s/pool-scheduler and the %s line's digest", r.repo, v.Image.Digests, reg.host, testLine)
	}
	ref, err := name.NewDigest(r.repo + "@" + r.digest)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transportTrusting(reg.caBundle)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(ref, remote.WithTransport(tr)); err != nil {
		t.Fatalf("the registry does not serve %s: %v", ref, err)
	}
	return r
}

// workloadImages returns every container image of the cluster's workloads (init containers
// included), by "Kind namespace/name".
func workloadImages(ctx context.Context, t *testing.T, c *cluster) map[string][]string {
	t.Helper()
	images := map[string][]string{}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"},
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "batch", Version: "v1", Resource: "jobs"},
		{Group: "batch", Version: "v1", Resource: "cronjobs"},
	} {
		list, err := c.cp.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			images[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = release.ContainerImages(o.Object)
		}
	}
	return images
}

// checkPushed: the install runs the pushed digest from the registry in every container (the
// chart as repository:tag@digest, a kustomize images: entry as repository@digest), and the
// namespace the README opts in is labelled.
func checkPushed(what string) func(ctx context.Context, t *testing.T, c *cluster, r *recipe) {
	return func(ctx context.Context, t *testing.T, c *cluster, r *recipe) {
		images := workloadImages(ctx, t, c)
		if len(images) == 0 {
			t.Fatalf("%s: nothing installed", what)
		}
		for w, imgs := range images {
			for _, img := range imgs {
				ref, err := name.NewDigest(img)
				if err != nil || ref.Context().String() != r.repo || ref.DigestStr() != r.digest {
					t.Errorf("%s: %s runs %s, want %s[:tag]@%s", what, w, img, r.repo, r.digest)
				}
			}
		}
		checkOptedIn(ctx, t, c)
	}
}

// checkImages: every container of the install runs a checkout's image of line (before a
// release: the tag, no digest); "" is the test cluster's line, which the chart picks.
func checkImages(line string) func(ctx context.Context, t *testing.T, c *cluster, r *recipe) {
	return func(ctx context.Context, t *testing.T, c *cluster, r *recipe) {
		if line == "" {
			line = testLine
		}
		want := shippedRepo + ":v0.1.0-k8s" + line
		images := workloadImages(ctx, t, c)
		if len(images) == 0 {
			t.Fatal("nothing installed")
		}
		for w, imgs := range images {
			for _, img := range imgs {
				if img != want {
					t.Errorf("%s runs %s, want %s", w, img, want)
				}
			}
		}
		checkOptedIn(ctx, t, c)
	}
}

func checkOptedIn(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	ns, err := c.cp.Client.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pool-scheduler.io/enabled"] != "true" {
		t.Errorf("namespace shop is not opted in: labels %v", ns.Labels)
	}
}

// checkCRDUpgraded: the CRD block replaced the previous CRD (which lacks the rule refusing the
// domain labeler's keys) with the chart's, and the set stored under the old one is still served.
func checkCRDUpgraded(ctx context.Context, t *testing.T, c *cluster, _ *recipe) {
	crd := getCRD(ctx, t, c)
	if !strings.Contains(crdText(t, crd), "topology.pool-scheduler.io/") {
		t.Errorf("the CRD is still the previous one: no rule on topology.pool-scheduler.io/ keys")
	}
	if _, err := c.cp.Dynamic.Resource(setGVR).Namespace("pipeline-system").Get(ctx, "pool1", metav1.GetOptions{}); err != nil {
		t.Errorf("the NodePoolLabelSet stored before the upgrade: %v", err)
	}
	// And the new rule is enforced: a set naming a domain labeler key is refused.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "labels.banzaicloud.io/v1alpha1", "kind": "NodePoolLabelSet",
		"metadata": map[string]any{"name": "bad", "namespace": "pipeline-system"},
		"spec":     map[string]any{"labels": map[string]any{"topology.pool-scheduler.io/update-domain": "1"}},
	}}
	if _, err := c.cp.Dynamic.Resource(setGVR).Namespace("pipeline-system").Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Errorf("after the CRD upgrade a set naming topology.pool-scheduler.io/update-domain was accepted")
	}
}

// checkChartValues: the chart README's upgrades took their --set values (the last one: the
// operator's namespace read, the labeler's controller off).
func checkChartValues(ctx context.Context, t *testing.T, c *cluster, _ *recipe) {
	cms, err := c.cp.Client.CoreV1().ConfigMaps("pool-scheduler").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, cm := range cms.Items {
		for _, v := range cm.Data {
			if strings.Contains(v, "KubeSchedulerConfiguration") && strings.Contains(v, "pipeline-system") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no scheduler configuration in namespace pool-scheduler names pipeline-system after the chart README's upgrade")
	}
	if _, err := c.cp.Client.AppsV1().Deployments("pool-scheduler").Get(ctx, "pool-labeler", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the labeler's controller is still installed after --set labeler.controller.enabled=false (err %v)", err)
	}
	if _, err := c.cp.Client.AppsV1().Deployments("pool-scheduler").Get(ctx, "pool-scheduler", metav1.GetOptions{}); err != nil {
		t.Errorf("the scheduler: %v", err)
	}
}

var setGVR = schema.GroupVersionResource{Group: "labels.banzaicloud.io", Version: "v1alpha1", Resource: "nodepoollabelsets"}

// freshCluster is a cluster as a user brings it: no NodePoolLabelSet CRD (the control plane
// installs the current one for other tests; Helm must create it here) and the namespace the
// README opts in.
func freshCluster(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	deleteCRD(ctx, t, c)
	if _, err := c.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// previousCRD is a cluster that holds an earlier CRD of this repository (testdata, from commit
// e59f13a: before the rule on the domain labeler's keys) and a set stored under it.
func previousCRD(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	freshCluster(ctx, t, c)
	data, err := os.ReadFile("testdata/crd-e59f13a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	cs := apiextensionsclient.NewForConfigOrDie(c.cp.Config)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(crdText(t, &crd), "topology.pool-scheduler.io/") {
		t.Fatal("testdata/crd-e59f13a.yaml already has the rule the upgrade is to bring")
	}
	for _, ns := range []string{"pipeline-system"} {
		if _, err := c.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "labels.banzaicloud.io/v1alpha1", "kind": "NodePoolLabelSet",
		"metadata": map[string]any{"name": "pool1", "namespace": "pipeline-system"},
		"spec":     map[string]any{"labels": map[string]any{"nodepool.banzaicloud.io/name": "pool1"}},
	}}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.cp.Dynamic.Resource(setGVR).Namespace("pipeline-system").Create(ctx, set, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("storing a set under the previous CRD: %v", err)
	}
}

func deleteCRD(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	cs := apiextensionsclient.NewForConfigOrDie(c.cp.Config)
	if err := cs.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crdName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the control plane's CRD was not deleted: %v", err)
	}
}

func getCRD(ctx context.Context, t *testing.T, c *cluster) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := apiextensionsclient.NewForConfigOrDie(c.cp.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func crdText(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	b, err := yaml.Marshal(crd.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tail(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// serverLine is the release line serving cp's Kubernetes: 1.<minor>.
func serverLine(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	sv, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// helm checks the chart's kubeVersion against the server's gitVersion, which an apiserver
	// in a test binary reports as v0.0.0-master unless the link stamps it as a release build's is.
	if strings.HasPrefix(sv.GitVersion, "v0.0.0") {
		t.Fatalf("the test's kube-apiserver reports version %s: run the test with `make readme-test`, which stamps k8s.io/component-base/version as the release binaries are", sv.GitVersion)
	}
	minor, err := strconv.Atoi(strings.TrimSuffix(sv.Minor, "+"))
	if err != nil {
		t.Fatalf("server minor %q: %v", sv.Minor, err)
	}
	return "1." + strconv.Itoa(minor)
}

// transportTrusting is an HTTP transport that trusts the CAs of a PEM bundle.
func transportTrusting(bundle string) (*http.Transport, error) {
	pemData, err := os.ReadFile(bundle)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("no certificate in %s", bundle)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}
