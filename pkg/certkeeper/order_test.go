package certkeeper

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestKeeperTrustsBeforeServing: whenever the keeper writes a serving certificate, every client's
// bundle the apiserver already stores (the webhooks' caBundle, the CA copy) verifies it: on the
// first install (empty Secrets, no caBundle yet), across ten years of renewals and CA rotations,
// and after the CA Secret was emptied (a new CA at once). A serving pod may load the certificate
// as soon as it is written, so the bundle must come first.
func TestKeeperTrustsBeforeServing(t *testing.T) {
	ctx := context.Background()
	wcaSecret := types.NamespacedName{Namespace: "ps", Name: "webhook-ca"}
	wSecret := types.NamespacedName{Namespace: "ps", Name: "webhook-tls"}
	wCopy := types.NamespacedName{Namespace: "ps-metrics", Name: "webhook-ca"}
	const name = "pool-scheduler-webhook.ps.svc"
	whc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "pool-scheduler"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.pool-scheduler.io"}, {Name: "b.pool-scheduler.io"}}}
	var objs []runtime.Object
	for _, nn := range []types.NamespacedName{wcaSecret, wSecret, wCopy} {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}})
	}
	cs := fake.NewClientset(append(objs, whc)...)
	k, err := NewKeeper(cs, time.Minute, Set{Name: "webhook", CAName: "pool-scheduler-webhook-ca", CASecret: wcaSecret, ServingSecret: wSecret,
		CACopies: []types.NamespacedName{wCopy}, DNSNames: []string{name}, WebhookConfiguration: "pool-scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	k.now = func() time.Time { return now }
	writes := 0
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sec := a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret)
		if sec.Namespace != wSecret.Namespace || sec.Name != wSecret.Name || len(sec.Data[corev1.TLSCertKey]) == 0 {
			return false, nil, nil
		}
		writes++
		stored, err := cs.Tracker().Get(admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations"), "", "pool-scheduler")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range stored.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks {
			if err := verifies2(w.ClientConfig.CABundle, sec.Data[corev1.TLSCertKey], now, name); err != nil {
				t.Errorf("%s: serving certificate written while webhook %s's stored caBundle does not verify it: %v", now.Format(time.DateOnly), w.Name, err)
			}
		}
		cp, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), wCopy.Namespace, wCopy.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifies2(cp.(*corev1.Secret).Data[CACert], sec.Data[corev1.TLSCertKey], now, name); err != nil {
			t.Errorf("%s: serving certificate written while the stored CA copy does not verify it: %v", now.Format(time.DateOnly), err)
		}
		return false, nil, nil
	})
	sync := func(what string) {
		t.Helper()
		if err := k.Sync(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	sync("first install")
	start := now
	for day := 5; day <= 3700; day += 5 {
		now = start.Add(time.Duration(day) * 24 * time.Hour)
		sync(fmt.Sprintf("day %d", day))
	}
	// The CA Secret emptied: a new CA, trusted before it serves.
	s, _ := cs.CoreV1().Secrets(wcaSecret.Namespace).Get(ctx, wcaSecret.Name, metav1.GetOptions{})
	s.Data = nil
	if _, err := cs.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync("after the CA Secret was emptied")
	if writes < 12 {
		t.Errorf("%d serving certificates written, want at least 12 (first, ten renewals, a new CA)", writes)
	}
}
