package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/pool-scheduler/pool-scheduler/pkg/controlplane"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// checkWebhookConfigurationWrites installs what manifests/admission/webhook adds to the scheduler
// (the webhook's and the certificate keeper's ServiceAccounts, RBAC, admission policy and
// MutatingWebhookConfiguration) and, with the keeper's token, changes the webhook's configuration: the caBundle alone is allowed; any
// other change to it is refused by the policy, other configurations and create/delete by RBAC,
// and, were RBAC to allow them (granted below), by the policy too.
func checkWebhookConfigurationWrites(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, alreadyApplied map[string][]string) {
	t.Helper()
	admin := cp.Client
	const ns = "pool-scheduler"
	done := map[string]bool{}
	for kind, names := range alreadyApplied {
		for _, n := range names {
			done[kind+" "+n] = true
		}
	}
	var access []*unstructured.Unstructured
	var whc *unstructured.Unstructured
	for _, o := range util.KustomizeObjects(t, filepath.Join(util.RepoRoot(), "manifests", "admission", "webhook")) {
		switch {
		case o.GetKind() == "MutatingWebhookConfiguration":
			whc = o
		case o.GetKind() == "Secret" || o.GetKind() == "Service" || done[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()]:
		default:
			access = append(access, o)
		}
	}
	if whc == nil {
		t.Fatal("manifests/admission/webhook has no MutatingWebhookConfiguration")
	}
	t.Logf("applied from manifests/admission/webhook: %v", util.ApplyAccessObjects(ctx, t, cp, access))
	var shipped admissionregistrationv1.MutatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(whc.Object, &shipped); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &shipped, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	theirs := shipped.DeepCopy()
	theirs.ObjectMeta = metav1.ObjectMeta{Name: "someone-elses"}
	theirs.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"nothing": "matches"}}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The certificate keeper keeps the webhook's caBundle (#34): the writes are its.
	saCfg, _ := util.ServiceAccountConfig(ctx, t, cp, ns, "pool-scheduler-certs", nil)
	sa := clientFor(t, saCfg)
	waitAllowed(ctx, t, sa, "pool-scheduler-certs", []authorizationv1.ResourceAttributes{
		{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: shipped.Name},
	})
	update := func(name string, change func(*admissionregistrationv1.MutatingWebhookConfiguration)) func(context.Context) error {
		return func(ctx context.Context) error {
			c, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("admin get: %w", err)
			}
			change(c)
			_, err = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
			return err
		}
	}
	// The policy is in force once it refuses a change; a change it let through meanwhile is undone.
	waitPolicy(ctx, t, admin, sa, shipped.Name)

	const (
		onlyCABundle = "the certificate keeper may change only clientConfig.caBundle of its webhooks"
		metadata     = "the certificate keeper may not change the labels, annotations, finalizers or ownerReferences"
		notOwnUpdate = "the certificate keeper may only update the caBundle of the MutatingWebhookConfiguration pool-scheduler"
	)
	everything := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
	}}
	refusals := []struct {
		name    string
		do      func(context.Context) error
		want    func(error) bool
		message string
	}{
		{"webhook widens its rules to every resource", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].Rules = everything
		}), anyError, onlyCABundle},
		{"webhook widens its rules while injecting a CA", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.CABundle = []byte("new CA")
			c.Webhooks[0].Rules = everything
		}), anyError, onlyCABundle},
		{"webhook selects every namespace (kube-system too)", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{}
		}), anyError, onlyCABundle},
		{"webhook drops its match conditions (DaemonSet and mirror pods)", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].MatchConditions = nil
		}), anyError, onlyCABundle},
		{"webhook fails closed", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}), anyError, onlyCABundle},
		{"webhook points its configuration at another service", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.Service.Name = "elsewhere"
		}), anyError, onlyCABundle},
		{"webhook adds a webhook", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			w := *c.Webhooks[0].DeepCopy()
			w.Name, w.Rules = "secrets.example.com", everything
			c.Webhooks = append(c.Webhooks, w)
		}), anyError, onlyCABundle},
		{"webhook removes its webhook", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks = nil
		}), anyError, onlyCABundle},
		{"webhook renames its webhook", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].Name = "renamed.pool-scheduler.io"
		}), anyError, onlyCABundle},
		{"webhook labels its configuration", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			metav1.SetMetaDataLabel(&c.ObjectMeta, "example.com/owned", "yes")
		}), anyError, metadata},
		{"webhook annotates its configuration (cert-manager CA injection)", update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, "cert-manager.io/inject-ca-from", "kube-system/other")
		}), anyError, metadata},
		// RBAC first (resourceNames and verbs).
		{"webhook updates another configuration's caBundle", update(theirs.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.CABundle = []byte("x")
		}), apierrors.IsForbidden, ""},
		{"webhook creates a configuration", func(ctx context.Context) error {
			_, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			return err
		}, apierrors.IsForbidden, ""},
		{"webhook deletes its configuration", func(ctx context.Context) error {
			return sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, shipped.Name, metav1.DeleteOptions{})
		}, apierrors.IsForbidden, ""},
	}
	check := func(refusals []struct {
		name    string
		do      func(context.Context) error
		want    func(error) bool
		message string
	}) {
		for _, r := range refusals {
			err := r.do(ctx)
			switch {
			case err == nil:
				t.Errorf("%s: allowed, want refused", r.name)
			case !r.want(err) || !strings.Contains(err.Error(), r.message):
				t.Errorf("%s: %v, want refused (%q)", r.name, err, r.message)
			default:
				t.Logf("%s: refused: %v", r.name, err)
			}
		}
	}
	check(refusals)

	// Allowed: the caBundle of each of its webhooks, as the webhook injects its CA.
	if err := update(shipped.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
		for i := range c.Webhooks {
			c.Webhooks[i].ClientConfig.CABundle = []byte("-----BEGIN CERTIFICATE-----\nnew CA\n-----END CERTIFICATE-----\n")
		}
	})(ctx); err != nil {
		t.Errorf("webhook injecting a new CA into its own configuration: %v, want allowed", err)
	}

	// Defence in depth: were the webhook granted every write on webhook configurations, the
	// policy would still refuse all but its own caBundle.
	grantWebhookConfigurations(ctx, t, admin, ns, "pool-scheduler-certs")
	waitAllowed(ctx, t, sa, "pool-scheduler-certs", []authorizationv1.ResourceAttributes{
		{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"},
		{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: shipped.Name},
		{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: theirs.Name},
		{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
	})
	check([]struct {
		name    string
		do      func(context.Context) error
		want    func(error) bool
		message string
	}{
		{"webhook, with RBAC allowing it, updates another configuration's caBundle", update(theirs.Name, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.CABundle = []byte("x")
		}), anyError, notOwnUpdate},
		{"webhook, with RBAC allowing it, creates a configuration", func(ctx context.Context) error {
			c := shipped.DeepCopy()
			c.ObjectMeta = metav1.ObjectMeta{Name: "new"}
			c.Webhooks[0].Rules = everything
			_, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, c, metav1.CreateOptions{})
			return err
		}, anyError, notOwnUpdate},
		{"webhook, with RBAC allowing it, creates a ValidatingWebhookConfiguration", func(ctx context.Context) error {
			_, err := sa.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
			return err
		}, anyError, notOwnUpdate},
		{"webhook, with RBAC allowing it, deletes its configuration", func(ctx context.Context) error {
			return sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, shipped.Name, metav1.DeleteOptions{})
		}, anyError, notOwnUpdate},
	})
}

// waitPolicy waits until the webhook's admission policy refuses a change to its configuration
// (policies take effect asynchronously), undoing the change while it is let through.
func waitPolicy(ctx context.Context, t *testing.T, admin, sa kubernetes.Interface, name string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		metav1.SetMetaDataLabel(&c.ObjectMeta, "example.com/probe", "x")
		if _, last = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{}); last != nil {
			return apierrors.IsInvalid(last) || strings.Contains(last.Error(), "ValidatingAdmissionPolicy"), nil
		}
		undo, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			delete(undo.Labels, "example.com/probe")
			_, err = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, undo, metav1.UpdateOptions{})
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the webhook's admission policy did not come into force: %v (last write: %v)", err, last)
	}
}

// grantWebhookConfigurations binds a ClusterRole allowing every write on webhook configurations
// to the ServiceAccount.
func grantWebhookConfigurations(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns, serviceAccount string) {
	t.Helper()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-webhook-configurations"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-webhook-configurations"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-webhook-configurations"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: serviceAccount}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
