package poolctl

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// TestHandbackFlags: handback needs a namespace given on the command line (-n) or every
// namespace (-A), never both and never the kubeconfig's; it is a dry run unless --dry-run=none,
// in kubectl's words (a bare --dry-run is client, as in kubectl); --force only with none.
func TestHandbackFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantNS  string
		wantDry string
		wantErr string
	}{
		{name: "no namespace", args: nil, wantErr: "--namespace/-n NAMESPACE, or --all-namespaces/-A"},
		{name: "empty namespace", args: []string{"-n", ""}, wantErr: "--namespace/-n NAMESPACE, or --all-namespaces/-A"},
		{name: "kubeconfig context only", args: []string{"--context", "prod"}, wantErr: "--namespace/-n NAMESPACE, or --all-namespaces/-A"},
		{name: "both", args: []string{"-n", "shop", "-A"}, wantErr: "give one"},
		{name: "namespace: dry run by default", args: []string{"-n", "shop"}, wantNS: "shop", wantDry: "client"},
		{name: "long flags", args: []string{"--namespace=shop", "--dry-run=none"}, wantNS: "shop", wantDry: "none"},
		{name: "every namespace", args: []string{"-A"}, wantNS: "", wantDry: "client"},
		{name: "bare --dry-run is client", args: []string{"--all-namespaces", "--dry-run"}, wantDry: "client"},
		{name: "server dry run", args: []string{"-A", "--dry-run=server"}, wantErr: `"server" is not supported`},
		{name: "boolean dry run", args: []string{"-A", "--dry-run=false"}, wantErr: `"false" is not "client"`},
		{name: "force in a dry run", args: []string{"-A", "--force"}, wantErr: "--force applies only with --dry-run=none"},
		{name: "force", args: []string{"-A", "--dry-run=none", "--force"}, wantDry: "none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := newHandbackOptions()
			f := pflag.NewFlagSet("handback", pflag.ContinueOnError)
			o.addFlags(f)
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			ns, err := o.validate(f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tt.wantNS, tt.wantDry}, []string{ns, o.dryRun}); diff != "" {
				t.Errorf("namespace, dry run (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeAdmission: handback deletes only when the replacements get the default scheduler:
// no admission path, a webhook without a ready endpoint that fails open, a webhook whose
// hand-off is off (switch off, or no healthy leader), a policy whose switch is off or missing.
// It refuses when a webhook answers while the leader is healthy, when the policy's switch is
// on, when a webhook fails closed without endpoints, when nothing tells the webhook's verdict,
// and when any of it cannot be read.
func TestJudgeAdmission(t *testing.T) {
	base := admissionState{Webhook: "pool-scheduler", Binding: "pool-scheduler", Switch: "pool-scheduler/pool-scheduler-handoff", Lease: "pool-scheduler/pool-scheduler"}
	ready := []webhookState{{Name: "pods.pool-scheduler.io", Service: "pool-scheduler/pool-scheduler-webhook", Ready: true}}
	down := []webhookState{{Name: "pods.pool-scheduler.io", Service: "pool-scheduler/pool-scheduler-webhook"}}
	with := func(f func(*admissionState)) admissionState {
		s := base
		f(&s)
		return s
	}
	for _, tt := range []struct {
		name string
		s    admissionState
		// wantRefused: the refusals, each by a phrase of it; wantNotes likewise.
		wantRefused []string
		wantNotes   []string
	}{
		{name: "no admission path", s: base,
			wantNotes: []string{"no MutatingWebhookConfiguration pool-scheduler", "no MutatingAdmissionPolicyBinding pool-scheduler"}},
		{name: "webhook, leader healthy", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks, s.LeaseFound, s.LeaderHealthy, s.SwitchFound, s.SwitchValue = true, ready, true, true, true, "true"
		}), wantRefused: []string{"leader is healthy"}, wantNotes: []string{"no MutatingAdmissionPolicyBinding"}},
		{name: "webhook, leader healthy, no hand-off controller", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks, s.LeaseFound, s.LeaderHealthy = true, ready, true, true
		}), wantRefused: []string{"leader is healthy"}, wantNotes: []string{"no MutatingAdmissionPolicyBinding"}},
		{name: "webhook, switch on, no Lease by that name", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks, s.SwitchFound, s.SwitchValue = true, ready, true, "true"
		}), wantRefused: []string{"switch pool-scheduler/pool-scheduler-handoff is on"}, wantNotes: []string{"no MutatingAdmissionPolicyBinding"}},
		{name: "webhook, nothing tells its verdict", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks = true, ready
		}), wantRefused: []string{"neither the hand-off switch"}, wantNotes: []string{"no MutatingAdmissionPolicyBinding"}},
		{name: "webhook, switch off (wedged leader)", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks, s.LeaseFound, s.LeaderHealthy, s.SwitchFound, s.SwitchValue, s.SwitchReason = true, ready, true, true, true, "false", "wedged"
		}), wantNotes: []string{"is off (wedged)", "no MutatingAdmissionPolicyBinding"}},
		{name: "webhook, no healthy leader", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks, s.LeaseFound, s.LeaderReason = true, ready, true, "the leader a has not renewed"
		}), wantNotes: []string{"no healthy leader (the leader a has not renewed)", "no MutatingAdmissionPolicyBinding"}},
		{name: "webhook without endpoints, fails open", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks, s.LeaseFound, s.LeaderHealthy = true, down, true, true
		}), wantNotes: []string{"no ready endpoint: kube-apiserver creates the replacements unchanged", "no MutatingAdmissionPolicyBinding"}},
		{name: "webhook without endpoints, fails closed", s: with(func(s *admissionState) {
			s.WebhookFound, s.Hooks = true, []webhookState{{Name: "w", Service: "ns/svc", FailClosed: true}}
		}), wantRefused: []string{"fails closed"}, wantNotes: []string{"no MutatingAdmissionPolicyBinding"}},
		{name: "policy, switch on", s: with(func(s *admissionState) {
			s.BindingFound, s.Param, s.ParamFound, s.ParamHandoff = true, "pool-scheduler/pool-scheduler-handoff", true, "true"
		}), wantRefused: []string{"the policy would hand the replacements to pool-scheduler again"}, wantNotes: []string{"no MutatingWebhookConfiguration"}},
		{name: "policy, switch off", s: with(func(s *admissionState) {
			s.BindingFound, s.Param, s.ParamFound, s.ParamHandoff = true, "pool-scheduler/pool-scheduler-handoff", true, "false"
		}), wantNotes: []string{"no MutatingWebhookConfiguration", "is off: replacements keep the default scheduler"}},
		{name: "policy, switch missing", s: with(func(s *admissionState) {
			s.BindingFound, s.Param = true, "pool-scheduler/pool-scheduler-handoff"
		}), wantNotes: []string{"no MutatingWebhookConfiguration", "the policy is skipped"}},
		{name: "unreadable", s: with(func(s *admissionState) {
			s.Unreadable = []string{"MutatingWebhookConfiguration pool-scheduler: forbidden"}
		}), wantRefused: []string{"cannot read MutatingWebhookConfiguration pool-scheduler: forbidden"},
			wantNotes: []string{"no MutatingWebhookConfiguration", "no MutatingAdmissionPolicyBinding"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			refusals, notes := judgeAdmission(tt.s)
			if diff := cmp.Diff(tt.wantRefused, refusals, phrases); diff != "" {
				t.Errorf("refusals (-want phrases +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNotes, notes, phrases); diff != "" {
				t.Errorf("notes (-want phrases +got):\n%s", diff)
			}
		})
	}
}

// phrases compares a list of phrases with a list of sentences: the same length, each sentence
// containing its phrase.
var phrases = cmp.FilterValues(func(_, _ []string) bool { return true }, cmp.Comparer(func(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.Contains(a[i], b[i]) && !strings.Contains(b[i], a[i]) {
			return false
		}
	}
	return true
}))
