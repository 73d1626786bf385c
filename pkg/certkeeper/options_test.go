package certkeeper

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestOptionsComplete: the flags become the sets to keep, and each error names the flag at fault.
func TestOptionsComplete(t *testing.T) {
	flags := func(mod func(*Options)) Options {
		o := Options{Namespace: "ps", CASecret: "m-ca", TLSSecret: "m-tls", WebhookCASecret: "w-ca", WebhookSecret: "w-tls", WebhookConfiguration: "pool-scheduler"}
		mod(&o)
		return o
	}
	tests := []struct {
		name     string
		opts     Options
		wantSets []string // name: serving Secret
		wantErr  string
	}{
		{name: "metrics", opts: flags(func(o *Options) { o.DNSNames = []string{"m.ps.svc"} }), wantSets: []string{"metrics: ps/m-tls"}},
		{name: "both", opts: flags(func(o *Options) { o.DNSNames, o.WebhookDNSName = []string{"m.ps.svc"}, "w.ps.svc" }), wantSets: []string{"metrics: ps/m-tls", "webhook: ps/w-tls"}},
		{name: "nothing to keep", opts: flags(func(*Options) {}), wantErr: "--metrics-tls-dns-names and --webhook-dns-name are both empty"},
		{name: "no namespace", opts: flags(func(o *Options) { o.Namespace, o.WebhookDNSName = "", "w.ps.svc" }), wantErr: "--namespace: required"},
		{name: "bad CA copy", opts: flags(func(o *Options) { o.DNSNames, o.CACopies = []string{"m.ps.svc"}, []string{"no-namespace"} }), wantErr: `--metrics-tls-ca-copy "no-namespace"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Complete()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range tt.opts.Sets {
				got = append(got, s.Name+": "+types.NamespacedName(s.ServingSecret).String())
			}
			if diff := cmp.Diff(tt.wantSets, got); diff != "" {
				t.Errorf("sets (-want +got):\n%s", diff)
			}
		})
	}
}
