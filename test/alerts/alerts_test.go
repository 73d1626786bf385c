// Package alerts tests the shipped Prometheus alerting rules (manifests/monitoring/alerts.yaml)
// with Prometheus' own rule file parser and rule engine. It is a module of its own: Prometheus'
// dependencies would fight the Kubernetes pins of the repository's go.mod (make alerts runs it).
package alerts

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

const (
	// The single source of the rules, and its copies (relative to the repository).
	rulesFile     = "manifests/monitoring/alerts.yaml"
	ruleCRFile    = "manifests/monitoring/prometheusrule.yaml"
	kustomization = "manifests/monitoring/kustomization.yaml"
	// The rules on the components manifests/admission/webhook installs.
	webhookRuleCRFile    = "manifests/monitoring/webhook/prometheusrule.yaml"
	webhookKustomization = "manifests/monitoring/webhook/kustomization.yaml"
	chartRulesFile       = "manifests/charts/pool-scheduler/files/alerts.yaml"
	chartTemplate        = "manifests/charts/pool-scheduler/templates/prometheusrule.yaml"
	runbooksFile         = "docs/operations.md"

	groupName   = "pool-scheduler"
	runbookBase = "https://github.com/pool-scheduler/pool-scheduler/blob/main/docs/operations.md#"

	// Rules are evaluated every evalInterval, as a Prometheus with evaluation_interval: 30s does.
	evalInterval = 30 * time.Second
)

func repoRoot() string { return filepath.Join("..", "..") }

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// promParser is the PromQL parser Prometheus uses without feature flags: the rules must not
// need any.
var promParser = parser.NewParser(parser.Options{})

// loadRuleFile parses the rule file as `promtool check rules` does: unknown fields are errors,
// every expression and template is checked.
func loadRuleFile(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(filepath.Join(repoRoot(), rulesFile), false, model.UTF8Validation, promParser, promslog.NewNopLogger())
	for _, err := range errs {
		t.Errorf("%s: %v", rulesFile, err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// alertCase is one scenario for one alert: input series (promqltest's load syntax; time 0 is
// the Unix epoch), rules evaluated every evalInterval from 0 to end.
type alertCase struct {
	name   string
	alert  string
	series string
	end    time.Duration
	// firingFrom is the first evaluation at which the alert must fire (it must not before: the
	// rule's `for` counts); zero for a case where it must never fire.
	firingFrom time.Duration
	// want is the alerts firing at end, their labels and summary.
	want []firing
}

type firing struct {
	Labels  map[string]string
	Summary string
}

var cases = []alertCase{
	// PoolSchedulerNoLeader: for 2m.
	{
		name:  "no series at all (no replica scraped, none has led)",
		alert: "PoolSchedulerNoLeader",
		series: `
			leader_election_master_status{name="pool-labeler", pod="pool-labeler-0"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 2 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNoLeader", "severity": "critical"}, Summary: "No pool-scheduler replica holds its Lease."}},
	},
	{
		name:  "every replica reports 0",
		alert: "PoolSchedulerNoLeader",
		series: `
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="a"} 0x20
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="b"} 0x20
			pool_scheduler_build_info{job="pool-scheduler", instance="a", version="v1"} 1x20
			pool_scheduler_build_info{job="pool-scheduler", instance="b", version="v1"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 2 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNoLeader", "severity": "critical"}, Summary: "No pool-scheduler replica holds its Lease."}},
	},
	{
		name:  "the leader's series goes stale (its pod is gone) and no standby takes over",
		alert: "PoolSchedulerNoLeader",
		series: `
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="a"} 1x10 stale
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="b"} 0x20
			pool_scheduler_build_info{job="pool-scheduler", instance="a", version="v1"} 1x10 stale
			pool_scheduler_build_info{job="pool-scheduler", instance="b", version="v1"} 1x20`,
		end:        20 * time.Minute,
		firingFrom: 13 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNoLeader", "severity": "critical"}, Summary: "No pool-scheduler replica holds its Lease."}},
	},
	{
		name:  "one leader, one standby",
		alert: "PoolSchedulerNoLeader",
		series: `
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="a"} 1x20
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="b"} 0x20
			pool_scheduler_build_info{job="pool-scheduler", instance="a", version="v1"} 1x20
			pool_scheduler_build_info{job="pool-scheduler", instance="b", version="v1"} 1x20`,
		end: 20 * time.Minute,
	},
	{
		name:  "the standby takes over within a minute",
		alert: "PoolSchedulerNoLeader",
		series: `
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="a"} 1x10 0x10
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="b"} 0x11 1x9
			pool_scheduler_build_info{job="pool-scheduler", instance="a", version="v1"} 1x20
			pool_scheduler_build_info{job="pool-scheduler", instance="b", version="v1"} 1x20`,
		end: 20 * time.Minute,
	},

	{
		// The cluster's default scheduler leads its own Lease under the same name: not ours.
		name:  "only the default scheduler leads",
		alert: "PoolSchedulerNoLeader",
		series: `
			leader_election_master_status{name="kube-scheduler", job="kube-scheduler", instance="cp"} 1x20
			leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="a"} 0x20
			pool_scheduler_build_info{job="pool-scheduler", instance="a", version="v1"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 2 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNoLeader", "severity": "critical"}, Summary: "No pool-scheduler replica holds its Lease."}},
	},

	// PoolSchedulerHandoffDegraded: for 5m.
	{
		name:  "the hand-off controller reports degraded",
		alert: "PoolSchedulerHandoffDegraded",
		series: `
			pool_scheduler_handoff{pod="pool-labeler-handoff-0"} 0x20
			pool_scheduler_webhook_handoff{pod="pool-scheduler-webhook-0"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerHandoffDegraded", "severity": "warning"}, Summary: "New pods are not handed to pool-scheduler (degraded hand-off)."}},
	},
	{
		// The same labels but the name: min(a or b) would drop the webhook's series.
		name:  "one webhook replica reports degraded, its series labelled like the controller's",
		alert: "PoolSchedulerHandoffDegraded",
		series: `
			pool_scheduler_handoff{job="pool-scheduler"} 1x20
			pool_scheduler_webhook_handoff{job="pool-scheduler"} 0x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerHandoffDegraded", "severity": "warning"}, Summary: "New pods are not handed to pool-scheduler (degraded hand-off)."}},
	},
	{
		name:  "both hand pods over",
		alert: "PoolSchedulerHandoffDegraded",
		series: `
			pool_scheduler_handoff{pod="pool-labeler-handoff-0"} 1x20
			pool_scheduler_webhook_handoff{pod="pool-scheduler-webhook-0"} 1x20
			pool_scheduler_webhook_handoff{pod="pool-scheduler-webhook-1"} 1x20`,
		end: 20 * time.Minute,
	},
	{
		name:  "degraded for 4 minutes (a leader change, a rollout), then back",
		alert: "PoolSchedulerHandoffDegraded",
		series: `
			pool_scheduler_handoff{pod="pool-labeler-handoff-0"} 0x3 1x16
			pool_scheduler_webhook_handoff{pod="pool-scheduler-webhook-0"} 0x3 1x16`,
		end: 20 * time.Minute,
	},

	// PoolSchedulerPodsWaiting: > 900 s for 5m.
	{
		name:  "a pod waits ever longer",
		alert: "PoolSchedulerPodsWaiting",
		series: `
			pool_scheduler_handoff_oldest_waiting_pod_seconds{pod="pool-labeler-handoff-0"} 0+60x30`,
		// 960 s at 16m, the first sample over 900: firing from 21m.
		end:        21 * time.Minute,
		firingFrom: 21 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerPodsWaiting", "severity": "warning"}, Summary: "A pod handed to pool-scheduler has waited 21m 0s unbound."}},
	},
	{
		name:  "pods wait at most 14 minutes",
		alert: "PoolSchedulerPodsWaiting",
		series: `
			pool_scheduler_handoff_oldest_waiting_pod_seconds{pod="pool-labeler-handoff-0"} 0+60x14 0+60x14 0x10`,
		end: 40 * time.Minute,
	},
	{
		name:  "over 900 s for 4 minutes only",
		alert: "PoolSchedulerPodsWaiting",
		series: `
			pool_scheduler_handoff_oldest_waiting_pod_seconds{pod="pool-labeler-handoff-0"} 0+60x19 0x10`,
		end: 30 * time.Minute,
	},

	// PoolSchedulerWebhookFailedOpen: no for.
	{
		name:  "the counter rises",
		alert: "PoolSchedulerWebhookFailedOpen",
		series: `
			kubernetes_build_info{job="apiserver", instance="10.0.0.1:443"} 1x40
			apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="pods.pool-scheduler.io", type="admit"} 2x20 5x20`,
		end:        25 * time.Minute,
		firingFrom: 21 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerWebhookFailedOpen", "severity": "warning", "name": "pods.pool-scheduler.io"}, Summary: "kube-apiserver admitted pods without the webhook pods.pool-scheduler.io."}},
	},
	{
		name:  "the first fail-open since kube-apiserver started (the counter appears at 1)",
		alert: "PoolSchedulerWebhookFailedOpen",
		series: `
			kubernetes_build_info{job="apiserver", instance="10.0.0.1:443"} 1x40
			apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="listed-pods.pool-scheduler.io", type="admit"} _x20 1x20`,
		end:        25 * time.Minute,
		firingFrom: 20 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerWebhookFailedOpen", "severity": "warning", "name": "listed-pods.pool-scheduler.io"}, Summary: "kube-apiserver admitted pods without the webhook listed-pods.pool-scheduler.io."}},
	},
	{
		name:  "no fail-open since Prometheus started, the counter of an earlier one steady",
		alert: "PoolSchedulerWebhookFailedOpen",
		series: `
			kubernetes_build_info{job="apiserver", instance="10.0.0.1:443"} 1x40
			apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="pods.pool-scheduler.io", type="admit"} 3x40`,
		end: 40 * time.Minute,
	},
	{
		name:  "another webhook fails open, and ours as a validating webhook would",
		alert: "PoolSchedulerWebhookFailedOpen",
		series: `
			kubernetes_build_info{job="apiserver", instance="10.0.0.1:443"} 1x40
			apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="pods.example.com", type="admit"} 0+1x40
			apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="pods.pool-scheduler.io", type="validating"} 0+1x40
			apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="xpods.pool-scheduler.io", type="admit"} 0+1x40`,
		end: 40 * time.Minute,
	},

	// PoolSchedulerNodesHeld: > 900 s for 5m, by pool.
	{
		name:  "a node of one pool stays held",
		alert: "PoolSchedulerNodesHeld",
		series: `
			pool_labeler_oldest_hold_seconds{pool="gpu", pod="pool-labeler-0"} 0+60x30
			pool_labeler_oldest_hold_seconds{pool="general", pod="pool-labeler-0"} 0+60x5 0x25`,
		end:        21 * time.Minute,
		firingFrom: 21 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNodesHeld", "severity": "warning", "pool": "gpu"}, Summary: "A node of pool gpu has been held for 21m 0s."}},
	},
	{
		name:  "a node without a pool label stays held",
		alert: "PoolSchedulerNodesHeld",
		series: `
			pool_labeler_oldest_hold_seconds{pool="", pod="pool-labeler-0"} 1000+60x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNodesHeld", "severity": "warning"}, Summary: "A node of no pool (no pool label) has been held for 26m 40s."}},
	},
	{
		name:  "nodes are held for minutes as they join, then labelled",
		alert: "PoolSchedulerNodesHeld",
		series: `
			pool_labeler_oldest_hold_seconds{pool="gpu", pod="pool-labeler-0"} 0+60x3 _x5 0+60x10 _x10
			pool_labeler_oldest_hold_seconds{pool="general", pod="pool-labeler-0"} 0+60x14 _x15`,
		end: 30 * time.Minute,
	},

	// PoolSchedulerNodesStartupTainted: > 600 s for 5m, by pool.
	{
		name:  "a node of one pool keeps the startup taint",
		alert: "PoolSchedulerNodesStartupTainted",
		series: `
			pool_labeler_oldest_startup_taint_seconds{pool="gpu", pod="pool-labeler-0"} 0+60x30
			pool_labeler_oldest_startup_taint_seconds{pool="general", pod="pool-labeler-0"} 0+60x5 _x25`,
		end:        16 * time.Minute,
		firingFrom: 16 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNodesStartupTainted", "severity": "warning", "pool": "gpu"}, Summary: "A node of pool gpu has carried the startup taint for 16m 0s."}},
	},
	{
		name:  "a node without a pool label keeps the startup taint",
		alert: "PoolSchedulerNodesStartupTainted",
		series: `
			pool_labeler_oldest_startup_taint_seconds{pool="", pod="pool-labeler-0"} 700+60x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerNodesStartupTainted", "severity": "warning"}, Summary: "A node of no pool (no pool label) has carried the startup taint for 21m 40s."}},
	},
	{
		name:  "nodes carry the taint for seconds as they join, then one for 9 minutes",
		alert: "PoolSchedulerNodesStartupTainted",
		series: `
			pool_labeler_oldest_startup_taint_seconds{pool="gpu", pod="pool-labeler-0"} 2 _x5 3 _x5 0+60x9 _x10`,
		end: 30 * time.Minute,
	},

	// PoolSchedulerVersionSkew: for 5m.
	{
		name:  "the scheduler finds kube-apiserver outside the line",
		alert: "PoolSchedulerVersionSkew",
		series: `
			pool_scheduler_apiserver_supported{pod="pool-scheduler-a"} 0x20
			pool_scheduler_webhook_apiserver_supported{pod="pool-scheduler-webhook-0"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerVersionSkew", "severity": "critical"}, Summary: "kube-apiserver runs a Kubernetes minor this pool-scheduler release line does not serve."}},
	},
	{
		name:  "the webhook finds kube-apiserver outside the line after a control-plane upgrade",
		alert: "PoolSchedulerVersionSkew",
		series: `
			pool_scheduler_apiserver_supported{job="pool-scheduler"} 1x30
			pool_scheduler_webhook_apiserver_supported{job="pool-scheduler"} 1x10 0x20`,
		end:        20 * time.Minute,
		firingFrom: 16 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerVersionSkew", "severity": "critical"}, Summary: "kube-apiserver runs a Kubernetes minor this pool-scheduler release line does not serve."}},
	},
	{
		name:  "both supported",
		alert: "PoolSchedulerVersionSkew",
		series: `
			pool_scheduler_apiserver_supported{pod="pool-scheduler-a"} 1x20
			pool_scheduler_apiserver_supported{pod="pool-scheduler-b"} 1x20
			pool_scheduler_webhook_apiserver_supported{pod="pool-scheduler-webhook-0"} 1x20`,
		end: 20 * time.Minute,
	},

	// PoolSchedulerLabelerDown: for 5m; leader-elected.
	{
		name:  "no labeler controller scraped",
		alert: "PoolSchedulerLabelerDown",
		series: `
			pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="h"} 1x20
			leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="h"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerLabelerDown", "severity": "warning"}, Summary: "No labeler controller runs and leads."}},
	},
	{
		name:  "the leader's pod is gone, the standby never takes over",
		alert: "PoolSchedulerLabelerDown",
		series: `
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="a"} 1x10 stale
			leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="a"} 1x10 stale
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="b"} 1x30
			leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="b"} 0x30`,
		end:        20 * time.Minute,
		firingFrom: 16 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerLabelerDown", "severity": "warning"}, Summary: "No labeler controller runs and leads."}},
	},
	{
		name:  "its scrapes fail (up 0): the series end",
		alert: "PoolSchedulerLabelerDown",
		series: `
			up{job="pool-labeler", instance="a"} 1x5 0x25
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="a"} 1x5
			leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="a"} 1x5`,
		end:        20 * time.Minute,
		firingFrom: 15 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerLabelerDown", "severity": "warning"}, Summary: "No labeler controller runs and leads."}},
	},
	{
		// A Lease name of another release: found by the mode, not by a name.
		name:  "one leader, one standby, whatever the Lease is called",
		alert: "PoolSchedulerLabelerDown",
		series: `
			pool_labeler_build_info{mode="controller", job="labeler-b", instance="a"} 1x30
			leader_election_master_status{name="other-labeler", job="labeler-b", instance="a"} 0x30
			pool_labeler_build_info{mode="controller", job="labeler-b", instance="b"} 1x30
			leader_election_master_status{name="other-labeler", job="labeler-b", instance="b"} 1x30`,
		end: 30 * time.Minute,
	},
	{
		name:  "without leader election (--leader-elect=false)",
		alert: "PoolSchedulerLabelerDown",
		series: `
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="a"} 1x30`,
		end: 30 * time.Minute,
	},
	{
		name:  "the standby takes over within a minute",
		alert: "PoolSchedulerLabelerDown",
		series: `
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="a"} 1x10 stale
			leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="a"} 1x10 stale
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="b"} 1x30
			leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="b"} 0x11 1x19`,
		end: 30 * time.Minute,
	},

	// PoolSchedulerHandoffControllerDown: for 5m; leader-elected.
	{
		name:  "every hand-off replica a standby",
		alert: "PoolSchedulerHandoffControllerDown",
		series: `
			pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="a"} 1x20
			leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="a"} 0x20
			pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="b"} 1x20
			leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="b"} 0x20
			pool_labeler_build_info{mode="controller", job="pool-labeler", instance="c"} 1x20
			leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="c"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerHandoffControllerDown", "severity": "warning"}, Summary: "No hand-off controller runs and leads."}},
	},
	{
		name:  "no hand-off replica scraped",
		alert: "PoolSchedulerHandoffControllerDown",
		series: `
			pool_labeler_build_info{mode="spread", job="pool-scheduler-spread", instance="s"} 1x20`,
		end:        10 * time.Minute,
		firingFrom: 5 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerHandoffControllerDown", "severity": "warning"}, Summary: "No hand-off controller runs and leads."}},
	},
	{
		name:  "a hand-off leader",
		alert: "PoolSchedulerHandoffControllerDown",
		series: `
			pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="a"} 1x30
			leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="a"} 1x30
			pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="b"} 1x30
			leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="b"} 0x30`,
		end: 30 * time.Minute,
	},

	// PoolSchedulerSpreadKeeperDown: for 15m; leader-elected.
	{
		name:  "the spread keeper's pods are gone",
		alert: "PoolSchedulerSpreadKeeperDown",
		series: `
			pool_labeler_build_info{mode="spread", job="pool-scheduler-spread", instance="a"} 1x5 stale
			leader_election_master_status{name="pool-scheduler-spread", job="pool-scheduler-spread", instance="a"} 1x5 stale`,
		end:        30 * time.Minute,
		firingFrom: 21 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerSpreadKeeperDown", "severity": "warning"}, Summary: "No spread keeper runs and leads."}},
	},
	{
		name:  "restarted within 15 minutes",
		alert: "PoolSchedulerSpreadKeeperDown",
		series: `
			pool_labeler_build_info{mode="spread", job="pool-scheduler-spread", instance="a"} 1x5 stale _x9 1x20
			leader_election_master_status{name="pool-scheduler-spread", job="pool-scheduler-spread", instance="a"} 1x5 stale _x9 1x20`,
		end: 35 * time.Minute,
	},

	// PoolSchedulerWebhookDown: for 5m.
	{
		name:  "no webhook replica scraped",
		alert: "PoolSchedulerWebhookDown",
		series: `
			pool_labeler_build_info{mode="webhook", job="pool-scheduler-webhook", instance="a"} 1x3 stale
			pool_labeler_build_info{mode="webhook", job="pool-scheduler-webhook", instance="b"} 1x3 stale`,
		end:        15 * time.Minute,
		firingFrom: 9 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerWebhookDown", "severity": "warning", "mode": "webhook"}, Summary: "No admission webhook replica runs."}},
	},
	{
		name:  "one of two webhook replicas gone",
		alert: "PoolSchedulerWebhookDown",
		series: `
			pool_labeler_build_info{mode="webhook", job="pool-scheduler-webhook", instance="a"} 1x3 stale
			pool_labeler_build_info{mode="webhook", job="pool-scheduler-webhook", instance="b"} 1x30`,
		end: 30 * time.Minute,
	},

	// PoolSchedulerCertificateKeeperDown: for 30m.
	{
		name:  "the certificate keeper is gone",
		alert: "PoolSchedulerCertificateKeeperDown",
		series: `
			pool_labeler_build_info{mode="certs", job="pool-scheduler-certs", instance="a"} 1x5 stale`,
		end:        40 * time.Minute,
		firingFrom: 36 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerCertificateKeeperDown", "severity": "warning", "mode": "certs"}, Summary: "The certificate keeper does not run."}},
	},
	{
		name:  "the keeper is rescheduled",
		alert: "PoolSchedulerCertificateKeeperDown",
		series: `
			pool_labeler_build_info{mode="certs", job="pool-scheduler-certs", instance="a"} 1x5 stale
			pool_labeler_build_info{mode="certs", job="pool-scheduler-certs", instance="b"} _x8 1x40`,
		end: 45 * time.Minute,
	},

	// PoolSchedulerHandoffSwitchFailing: increase over 5m for 10m.
	{
		name:  "the switch ConfigMap is missing: every sync fails",
		alert: "PoolSchedulerHandoffSwitchFailing",
		series: `
			pool_scheduler_handoff_switch_errors_total{job="pool-scheduler-handoff", instance="a"} 0x5 0+12x25
			pool_scheduler_handoff_switch_errors_total{job="pool-scheduler-handoff", instance="b"} 0x30`,
		// The first failure counted at 7m: firing 10 minutes later.
		end:        20 * time.Minute,
		firingFrom: 17 * time.Minute,
		want:       []firing{{Labels: map[string]string{"alertname": "PoolSchedulerHandoffSwitchFailing", "severity": "warning"}, Summary: "The hand-off controller cannot write the switch ConfigMap."}},
	},
	{
		name:  "one failed write, retried",
		alert: "PoolSchedulerHandoffSwitchFailing",
		series: `
			pool_scheduler_handoff_switch_errors_total{job="pool-scheduler-handoff", instance="a"} 0x10 1x30`,
		end: 40 * time.Minute,
	},

	// PoolSchedulerCertificateExpiring: < 30 days for 15m.
	{
		name:  "the keeper has not renewed for two months",
		alert: "PoolSchedulerCertificateExpiring",
		series: `
			pool_scheduler_certificate_not_after_timestamp_seconds{secret="pool-scheduler/pool-scheduler-metrics-serving", certificate="serving", pod="pool-scheduler-certs-0"} 2000000x30
			pool_scheduler_certificate_not_after_timestamp_seconds{secret="pool-scheduler/pool-scheduler-metrics-ca-key", certificate="ca", pod="pool-scheduler-certs-0"} 300000000x30`,
		end:        20 * time.Minute,
		firingFrom: 15 * time.Minute,
		want: []firing{{Labels: map[string]string{"alertname": "PoolSchedulerCertificateExpiring", "severity": "warning", "secret": "pool-scheduler/pool-scheduler-metrics-serving", "certificate": "serving"},
			Summary: "The serving certificate in pool-scheduler/pool-scheduler-metrics-serving expires in 23d 3h 13m 20s."}},
	},
	{
		name:  "renewed within 15 minutes",
		alert: "PoolSchedulerCertificateExpiring",
		series: `
			pool_scheduler_certificate_not_after_timestamp_seconds{secret="pool-scheduler/pool-scheduler-metrics-serving", certificate="serving"} 2500000x10 33000000x20`,
		end: 30 * time.Minute,
	},
}

// healthy is a cluster where everything works: no alert may fire.
const healthy = `
	leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="a"} 1x40
	leader_election_master_status{name="kube-scheduler", job="pool-scheduler", instance="b"} 0x40
	pool_scheduler_build_info{job="pool-scheduler", instance="a", version="v1"} 1x40
	pool_scheduler_build_info{job="pool-scheduler", instance="b", version="v1"} 1x40
	pool_labeler_build_info{mode="controller", job="pool-labeler", instance="l0"} 1x40
	pool_labeler_build_info{mode="controller", job="pool-labeler", instance="l1"} 1x40
	leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="l0"} 1x40
	leader_election_master_status{name="pool-labeler", job="pool-labeler", instance="l1"} 0x40
	pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="h0"} 1x40
	pool_labeler_build_info{mode="handoff", job="pool-scheduler-handoff", instance="h1"} 1x40
	leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="h0"} 0x40
	leader_election_master_status{name="pool-scheduler-handoff", job="pool-scheduler-handoff", instance="h1"} 1x40
	pool_scheduler_handoff_switch_errors_total{job="pool-scheduler-handoff", instance="h0"} 0x40
	pool_scheduler_handoff_switch_errors_total{job="pool-scheduler-handoff", instance="h1"} 0x20 1x20
	pool_labeler_build_info{mode="spread", job="pool-scheduler-spread", instance="s0"} 1x40
	leader_election_master_status{name="pool-scheduler-spread", job="pool-scheduler-spread", instance="s0"} 1x40
	pool_labeler_build_info{mode="webhook", job="pool-scheduler-webhook", instance="w0"} 1x40
	pool_labeler_build_info{mode="webhook", job="pool-scheduler-webhook", instance="w1"} 1x40
	pool_labeler_build_info{mode="certs", job="pool-scheduler-certs", instance="c0"} 1x40
	pool_scheduler_handoff{pod="pool-labeler-handoff-0"} 1x40
	pool_scheduler_webhook_handoff{pod="pool-scheduler-webhook-0"} 1x40
	pool_scheduler_webhook_handoff{pod="pool-scheduler-webhook-1"} 1x40
	pool_scheduler_handoff_oldest_waiting_pod_seconds{pod="pool-labeler-handoff-0"} 0x10 0+30x10 0x20
	pool_scheduler_handoff_waiting_pods{owner="recreatable", pod="pool-labeler-handoff-0"} 0x10 3x10 0x20
	kubernetes_build_info{job="apiserver", instance="10.0.0.1:443"} 1x40
	apiserver_admission_webhook_fail_open_count{job="apiserver", instance="10.0.0.1:443", name="pods.pool-scheduler.io", type="admit"} 7x40
	pool_scheduler_certificate_not_after_timestamp_seconds{secret="pool-scheduler/pool-scheduler-metrics-serving", certificate="serving"} 31000000x40
	pool_labeler_oldest_hold_seconds{pool="gpu", pod="pool-labeler-0"} 0+60x4 _x36
	pool_scheduler_apiserver_supported{pod="pool-scheduler-a"} 1x40
	pool_scheduler_webhook_apiserver_supported{pod="pool-scheduler-webhook-0"} 1x40`

// evaluation is what the rule engine did with one alert over a run.
type evaluation struct {
	firstFiring time.Duration // -1: never fired
	atEnd       []firing      // firing at the last evaluation
	evalErr     error
}

// evaluate loads series (scraped every minute) and the rule file into Prometheus' rule manager,
// evaluates the group every evalInterval from 0 to end, as Prometheus does (`for` counted from
// the first evaluation that found the expression true), and reports the named alerts.
func evaluate(t *testing.T, series string, end time.Duration, alertNames ...string) map[string]*evaluation {
	t.Helper()
	series = strings.TrimSpace(series)
	// A blank line ends promqltest's load command: the series after it would not be loaded, and
	// an alert on absent series would pass for the wrong reason.
	for _, line := range strings.Split(series, "\n") {
		if strings.TrimSpace(line) == "" {
			t.Fatalf("series: a blank line in %q", series)
		}
	}
	suite, err := promqltest.NewLazyLoader("load 1m\n\t"+series, promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promParser,
	})
	if err != nil {
		t.Fatalf("series: %v", err)
	}
	t.Cleanup(func() {
		if err := suite.Close(); err != nil {
			t.Error(err)
		}
	})
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promParser,
	})
	groups, errs := m.LoadGroups(evalInterval, labels.EmptyLabels(), "", nil, false, filepath.Join(repoRoot(), rulesFile))
	if len(errs) > 0 {
		t.Fatalf("loading %s: %v", rulesFile, errs)
	}
	out := map[string]*evaluation{}
	for _, n := range alertNames {
		out[n] = &evaluation{firstFiring: -1}
	}
	var alerting []*rules.AlertingRule
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok && out[ar.Name()] != nil {
				alerting = append(alerting, ar)
			}
		}
	}
	if len(alerting) != len(alertNames) {
		t.Fatalf("%d of the alerts %v are in %s", len(alerting), alertNames, rulesFile)
	}
	start := time.Unix(0, 0).UTC()
	for at := time.Duration(0); at <= end; at += evalInterval {
		ts := start.Add(at)
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatalf("loading samples till %v: %v", at, err)
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
			}
		})
		for _, ar := range alerting {
			ev := out[ar.Name()]
			if err := ar.LastError(); err != nil && ev.evalErr == nil {
				ev.evalErr = fmt.Errorf("at %v: %w", at, err)
			}
			ev.atEnd = nil
			for _, a := range ar.ActiveAlerts() {
				if a.State != rules.StateFiring {
					continue
				}
				if ev.firstFiring < 0 {
					ev.firstFiring = at
				}
				ev.atEnd = append(ev.atEnd, firing{Labels: a.Labels.Map(), Summary: a.Annotations.Get("summary")})
			}
		}
	}
	return out
}

// TestAlerts makes each alert fire where it must, no earlier than its `for` allows, with the
// labels and summary an operator sees, and stay silent where it must not fire.
func TestAlerts(t *testing.T) {
	for _, tt := range cases {
		t.Run(tt.alert+"/"+tt.name, func(t *testing.T) {
			ev := evaluate(t, tt.series, tt.end, tt.alert)[tt.alert]
			if ev.evalErr != nil {
				t.Fatalf("evaluating %s: %v", tt.alert, ev.evalErr)
			}
			if tt.firingFrom == 0 {
				if ev.firstFiring >= 0 {
					t.Errorf("%s fired at %v, want it silent", tt.alert, ev.firstFiring)
				}
				return
			}
			if ev.firstFiring != tt.firingFrom {
				t.Errorf("%s first fired at %v, want %v (-1: never)", tt.alert, ev.firstFiring, tt.firingFrom)
			}
			if diff := cmp.Diff(tt.want, ev.atEnd); diff != "" {
				t.Errorf("%s firing at %v (-want +got):\n%s", tt.alert, tt.end, diff)
			}
		})
	}
}

// TestHealthyClusterIsSilent: every metric at a healthy value (a pod waiting a few minutes, a
// node held as it joins, an old fail-open) fires no alert of the file.
func TestHealthyClusterIsSilent(t *testing.T) {
	names := alertNames(t)
	for name, ev := range evaluate(t, healthy, 40*time.Minute, names...) {
		if ev.evalErr != nil {
			t.Errorf("evaluating %s: %v", name, ev.evalErr)
		}
		if ev.firstFiring >= 0 {
			t.Errorf("%s fired at %v in a healthy cluster", name, ev.firstFiring)
		}
	}
}

func alertNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, g := range loadRuleFile(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// TestEveryAlertHasCases: each alert of the file has a case where it fires and one where it
// stays silent, and each case names an alert of the file: a new alert cannot go untested.
func TestEveryAlertHasCases(t *testing.T) {
	names := alertNames(t)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tt := range cases {
		if !slices.Contains(names, tt.alert) {
			t.Errorf("case %q: %s is not an alert of %s", tt.name, tt.alert, rulesFile)
		}
		if tt.firingFrom > 0 {
			fires[tt.alert] = true
		} else {
			silent[tt.alert] = true
		}
	}
	for _, n := range names {
		if !fires[n] {
			t.Errorf("%s has no case where it fires: add one to cases", n)
		}
		if !silent[n] {
			t.Errorf("%s has no case where it stays silent: add one to cases", n)
		}
	}
}

// TestRuleFile: the file is one valid group, pool-scheduler, of alerts that each carry a
// severity, a summary, a description and a runbook: a section of docs/operations.md.
func TestRuleFile(t *testing.T) {
	groups := loadRuleFile(t)
	if len(groups.Groups) != 1 || groups.Groups[0].Name != groupName {
		var got []string
		for _, g := range groups.Groups {
			got = append(got, g.Name)
		}
		t.Fatalf("groups %q, want one, %q", got, groupName)
	}
	runbooks := string(readFile(t, runbooksFile))
	seen := map[string]bool{}
	for _, r := range groups.Groups[0].Rules {
		if r.Alert == "" {
			t.Errorf("recording rule %s: the file holds alerts only", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s: two alerts of that name", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		anchor := "alert-" + strings.ToLower(r.Alert)
		if got, want := r.Annotations["runbook_url"], runbookBase+anchor; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		// GitHub's anchor of "### Alert: <Name>" is alert-<name in lower case>.
		heading := regexp.MustCompile(`(?m)^### Alert: ` + regexp.QuoteMeta(r.Alert) + `$`)
		if !heading.MatchString(runbooks) {
			t.Errorf("%s: %s has no section \"### Alert: %s\" (the runbook_url's anchor %s)", r.Alert, runbooksFile, r.Alert, anchor)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the copies of the rule file (the chart's, the PrometheusRule) from it")

// webhookAlerts are the alerts on an absent component that kubectl apply -k manifests does not
// install, but manifests/admission/webhook does (the webhook and its certificate keeper): they
// are in webhookRuleCRFile, every other alert in ruleCRFile, so that neither fires for a
// component that was never installed. The chart renders each where it installs the component
// (templates/prometheusrule.yaml; test/integration checks it).
var webhookAlerts = []string{"PoolSchedulerWebhookDown", "PoolSchedulerCertificateKeeperDown"}

// ruleCopy is a kustomize PrometheusRule generated from the rule file: the alerts keep selects.
type ruleCopy struct {
	file, name, kustomization string
	keep                      func(alert string) bool
}

var ruleCopies = []ruleCopy{
	{file: ruleCRFile, name: "pool-scheduler", kustomization: kustomization, keep: func(a string) bool { return !slices.Contains(webhookAlerts, a) }},
	{file: webhookRuleCRFile, name: "pool-scheduler-webhook", kustomization: webhookKustomization, keep: func(a string) bool { return slices.Contains(webhookAlerts, a) }},
}

// ruleCRHeader is a kustomize PrometheusRule up to its groups, which follow as alerts.yaml's,
// indented.
const ruleCRHeader = `# Generated from alerts.yaml by test/alerts (cd test/alerts && go test -run Copies -args -update);
# the test fails when the two differ. Prometheus-operator selects PrometheusRules by label (the
# Prometheus resource's ruleSelector): add the labels yours selects, for example with a
# kustomize overlay (labels:).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: %s
  namespace: pool-scheduler
  labels:
    app.kubernetes.io/name: pool-scheduler
spec:
  groups:
`

// ruleCR renders a kustomize PrometheusRule from the rule file: its groups, comments included,
// under spec, with the alerts keep selects (a rule's comment goes with it).
func ruleCR(t *testing.T, source []byte, c ruleCopy) []byte {
	t.Helper()
	_, groups, ok := bytes.Cut(source, []byte("\ngroups:\n"))
	if !ok {
		t.Fatalf("%s: no top-level groups: line", rulesFile)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, ruleCRHeader, c.name)
	write := func(line string) {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	var pending []string // comment lines before the next rule
	include := true
	for _, line := range strings.SplitAfter(string(groups), "\n") {
		switch {
		case strings.HasPrefix(line, "  - alert: "):
			include = c.keep(strings.TrimSpace(strings.TrimPrefix(line, "  - alert: ")))
			if include {
				for _, p := range pending {
					write(p)
				}
				write(line)
			}
			pending = nil
		case strings.HasPrefix(line, "  #"):
			pending = append(pending, line)
		default:
			if include {
				write(line)
			}
		}
	}
	return b.Bytes()
}

// keptGroups is the rule file's groups (decoded YAML) with the alerts keep selects.
func keptGroups(groups any, keep func(string) bool) any {
	list, _ := groups.([]any)
	var out []any
	for _, g := range list {
		gm, _ := g.(map[string]any)
		kept := map[string]any{}
		for k, v := range gm {
			kept[k] = v
		}
		var rules []any
		rs, _ := gm["rules"].([]any)
		for _, r := range rs {
			if rm, _ := r.(map[string]any); keep(fmt.Sprint(rm["alert"])) {
				rules = append(rules, r)
			}
		}
		kept["rules"] = rules
		out = append(out, kept)
	}
	return out
}

// TestCopiesMatchTheRuleFile: the kustomize PrometheusRule's spec.groups and the chart's copy are
// the rule file (-update writes them).
func TestCopiesMatchTheRuleFile(t *testing.T) {
	source := readFile(t, rulesFile)
	copies := map[string][]byte{chartRulesFile: source}
	for _, c := range ruleCopies {
		copies[c.file] = ruleCR(t, source, c)
	}
	for file, want := range copies {
		if *update {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(repoRoot(), file)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repoRoot(), file), want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if diff := cmp.Diff(string(want), string(readFile(t, file))); diff != "" {
			t.Errorf("%s is not a copy of %s; run cd test/alerts && go test -run Copies -args -update (-want +got):\n%s", file, rulesFile, diff)
		}
	}

	// The rendering keeps the groups as they are: the same YAML under spec, every alert in
	// exactly one kustomize PrometheusRule.
	var want struct {
		Groups any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(source, &want); err != nil {
		t.Fatal(err)
	}
	for _, name := range alertNames(t) {
		var in []string
		for _, c := range ruleCopies {
			if c.keep(name) {
				in = append(in, c.file)
			}
		}
		if len(in) != 1 {
			t.Errorf("%s is in %q, want one kustomize PrometheusRule", name, in)
		}
	}
	for _, c := range ruleCopies {
		var cr struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name      string `yaml:"name"`
				Namespace string `yaml:"namespace"`
			} `yaml:"metadata"`
			Spec struct {
				Groups any `yaml:"groups"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal(copies[c.file], &cr); err != nil {
			t.Fatal(err)
		}
		if got := []string{cr.APIVersion, cr.Kind, cr.Metadata.Namespace, cr.Metadata.Name}; !slices.Equal(got, []string{"monitoring.coreos.com/v1", "PrometheusRule", "pool-scheduler", c.name}) {
			t.Errorf("%s is %v, want the monitoring.coreos.com/v1 PrometheusRule pool-scheduler/%s", c.file, got, c.name)
		}
		if diff := cmp.Diff(keptGroups(want.Groups, c.keep), cr.Spec.Groups); diff != "" {
			t.Errorf("%s spec.groups is not %s's groups (-%s +%s):\n%s", c.file, rulesFile, rulesFile, c.file, diff)
		}

		var k struct {
			Resources []string `yaml:"resources"`
		}
		if err := yaml.Unmarshal(readFile(t, c.kustomization), &k); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(k.Resources, filepath.Base(c.file)) {
			t.Errorf("%s does not list %s", c.kustomization, filepath.Base(c.file))
		}
	}
	if tpl := string(readFile(t, chartTemplate)); !strings.Contains(tpl, `.Files.Get "files/alerts.yaml"`) {
		t.Errorf("%s does not render %s (.Files.Get \"files/alerts.yaml\")", chartTemplate, chartRulesFile)
	}
}
