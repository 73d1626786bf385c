package release

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// TestPushChart: the chart pushed as `helm push` does is pulled back by Helm's registry client
// (what `helm install oci://` runs) as the very .tgz (the digest SHA256SUMS lists), under
// <repository>/pool-scheduler:<chart version>.
func TestPushChart(t *testing.T) {
	t.Setenv("HELM_REGISTRY_CONFIG", t.TempDir()+"/registry.json") // no login: an open registry
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := PushChart(tgz, "oci://"+u.Host+"/charts", true)
	if err != nil {
		t.Fatal(err)
	}
	want := u.Host + "/charts/pool-scheduler:" + ch.Metadata.Version + "@sha256:"
	if !strings.HasPrefix(ref, want) {
		t.Errorf("pushed %s, want %s...", ref, want)
	}
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(u.Host + "/charts/pool-scheduler:" + ch.Metadata.Version)
	if err != nil {
		t.Fatalf("pulling the pushed chart: %v", err)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, data) {
		t.Errorf("the pulled chart (%d bytes) is not the pushed .tgz (%d bytes)", len(pulled.Chart.Data), len(data))
	}
	if _, err := PushChart(tgz+".missing", "oci://"+u.Host+"/charts", true); err == nil {
		t.Error("pushing a missing file succeeded")
	}
}
