package certkeeper

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Options configure `pool-labeler certs`: the flags that say which certificates to keep, how
// often they are checked, and the sets Complete derives from the flags.
type Options struct {
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

	Interval time.Duration
	// Sets are the certificate sets kept: Complete fills them from the flags above.
	Sets []Set
}

// Complete validates o and fills o.Sets; each error names the flag at fault.
func (o *Options) Complete() error {
	sets, err := o.sets()
	o.Sets = sets
	return err
}

// sets returns the sets o asks for, validated.
func (o *Options) sets() ([]Set, error) {
	if o.Namespace == "" {
		return nil, errors.New("--namespace: required (default: $POD_NAMESPACE)")
	}
	var sets []Set
	if len(o.DNSNames) > 0 {
		set := Set{Name: "metrics", CAName: "pool-scheduler-metrics-ca", DNSNames: o.DNSNames, CertDir: o.CertDir,
			CASecret: types.NamespacedName{Namespace: o.Namespace, Name: o.CASecret}, ServingSecret: types.NamespacedName{Namespace: o.Namespace, Name: o.TLSSecret}}
		for _, c := range o.CACopies {
			ns, name, ok := strings.Cut(c, "/")
			if !ok {
				return nil, fmt.Errorf("--metrics-tls-ca-copy %q: want <namespace>/<name>", c)
			}
			set.CACopies = append(set.CACopies, types.NamespacedName{Namespace: ns, Name: name})
		}
		sets = append(sets, set)
	}
	if o.WebhookDNSName != "" {
		sets = append(sets, Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", DNSNames: []string{o.WebhookDNSName},
			CASecret:             types.NamespacedName{Namespace: o.Namespace, Name: o.WebhookCASecret},
			ServingSecret:        types.NamespacedName{Namespace: o.Namespace, Name: o.WebhookSecret},
			WebhookConfiguration: o.WebhookConfiguration})
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

// SetupWithManager adds the keeper of o.Sets to mgr, which cmd/pool-labeler/app builds; its
// metrics and probe servers start first: a pass that fails (a Secret or the webhook
// configuration missing) is logged, counted (pool_scheduler_certificate_syncs_total{result="error"})
// and retried within 10 seconds while /healthz stays ok; /readyz reports whether the last pass
// succeeded.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	k, err := NewKeeper(cs, o.Interval, o.Sets...)
	if err != nil {
		return err
	}
	return k.setupWithManager(mgr, o)
}

func (k *Keeper) setupWithManager(mgr ctrl.Manager, o Options) error {
	for _, s := range o.Sets {
		if s.CertDir != "" {
			if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
		}
	}
	if err := mgr.Add(manager.RunnableFunc(k.Run)); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("certificates", func(*http.Request) error { return k.Ready() })
}
