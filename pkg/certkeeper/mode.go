package certkeeper

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Flags are `pool-labeler certs`' flags that say which certificates to keep.
type Flags struct {
	// Namespace holds every Secret named below but the CA copies.
	Namespace string
	// The metrics set: kept when DNSNames is not empty, written to CertDir too.
	CASecret, TLSSecret string
	DNSNames            []string
	// CACopies are <namespace>/<name> of Secrets that get the CA bundle alone.
	CACopies []string
	CertDir  string
	// The webhook's set: kept when WebhookDNSName is not empty.
	WebhookCASecret, WebhookSecret       string
	WebhookDNSName, WebhookConfiguration string
}

// Sets returns the sets f asks for, validated; each error names the flag at fault.
func (f Flags) Sets() ([]Set, error) {
	if f.Namespace == "" {
		return nil, errors.New("--namespace: required (default: $POD_NAMESPACE)")
	}
	var sets []Set
	if len(f.DNSNames) > 0 {
		set := Set{Name: "metrics", CAName: "pool-scheduler-metrics-ca", DNSNames: f.DNSNames, CertDir: f.CertDir,
			CASecret: types.NamespacedName{Namespace: f.Namespace, Name: f.CASecret}, ServingSecret: types.NamespacedName{Namespace: f.Namespace, Name: f.TLSSecret}}
		for _, c := range f.CACopies {
			ns, name, ok := strings.Cut(c, "/")
			if !ok {
				return nil, fmt.Errorf("--metrics-tls-ca-copy %q: want <namespace>/<name>", c)
			}
			set.CACopies = append(set.CACopies, types.NamespacedName{Namespace: ns, Name: name})
		}
		sets = append(sets, set)
	}
	if f.WebhookDNSName != "" {
		sets = append(sets, Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", DNSNames: []string{f.WebhookDNSName},
			CASecret:             types.NamespacedName{Namespace: f.Namespace, Name: f.WebhookCASecret},
			ServingSecret:        types.NamespacedName{Namespace: f.Namespace, Name: f.WebhookSecret},
			WebhookConfiguration: f.WebhookConfiguration})
	}
	if len(sets) == 0 {
		return nil, errors.New("nothing to keep: --metrics-tls-dns-names and --webhook-dns-name are both empty")
	}
	for _, set := range sets {
		if err := set.Validate(); err != nil {
			return nil, err
		}
	}
	return sets, nil
}
