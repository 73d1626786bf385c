package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// helmUninstallTimeout is helm uninstall's default --timeout in seconds (helm.sh/helm/v3
// cmd/helm/uninstall.go): how long Helm waits for each hook before it gives up.
const helmUninstallTimeout = 300

// TestHelmChartUninstallHookBound: the uninstall hook holds helm uninstall at most its
// timeoutSeconds + 60 s whatever the state of its image. Its Job has an activeDeadlineSeconds of
// timeoutSeconds + 50 (the Job controller fails it then, pods that never pulled their image or
// were never scheduled included), its pod a grace period of 10 s (the Job is marked Failed, what
// Helm waits for, once its pod stopped), a backoffLimit and restartPolicy Never (a crashing pod
// fails it sooner), and the largest timeoutSeconds the schema accepts keeps that under helm
// uninstall's default --timeout. Every hook object is deleted once the hook succeeded and
// replaced when it runs again; a failed Job has a TTL, so nothing of it outlives
// `helm uninstall --no-hooks`. docs/operations.md and the chart's README state the bound.
func TestHelmChartUninstallHookBound(t *testing.T) {
	const name = "pool-scheduler-handback"
	tests := []struct {
		name    string
		values  string
		timeout int64
		wantErr string
	}{
		{name: "defaults", timeout: 120},
		{name: "the shortest", values: `handoff: {uninstallHook: {timeoutSeconds: 10}}`, timeout: 10},
		{name: "the longest under helm's timeout", values: `handoff: {uninstallHook: {timeoutSeconds: 240}}`, timeout: 240},
		{name: "past helm's timeout", values: `handoff: {uninstallHook: {timeoutSeconds: 241}}`, wantErr: "/handoff/uninstallHook/timeoutSeconds"},
		{name: "no time to hand back", values: `handoff: {uninstallHook: {timeoutSeconds: 5}}`, wantErr: "/handoff/uninstallHook/timeoutSeconds"},
		{name: "policy mode", values: `admission: {mode: policy}`, timeout: 120},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderChart(t, chartNamespace, tt.values)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("rendering: %v, want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			job := r.getIn(t, "Job", chartNamespace, name)
			got := hookJobBounds(t, job)
			want := hookBounds{
				ActiveDeadlineSeconds:         tt.timeout + 50,
				TerminationGracePeriodSeconds: 10,
				BackoffLimit:                  2,
				TTLSecondsAfterFinished:       3600,
				RestartPolicy:                 "Never",
				HandbackTimeout:               fmt.Sprintf("--timeout=%ds", tt.timeout),
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the hook Job's bounds (-want +got):\n%s", diff)
			}
			if bound := got.ActiveDeadlineSeconds + got.TerminationGracePeriodSeconds; bound != tt.timeout+60 || bound > helmUninstallTimeout {
				t.Errorf("the hook holds helm uninstall up to %d s, want timeoutSeconds + 60 = %d s, within helm's default --timeout (%d s)", bound, tt.timeout+60, helmUninstallTimeout)
			}
			// Every hook object: run before anything is removed, replaced on a rerun, gone once it
			// succeeded.
			hooks := 0
			for _, o := range r.objects {
				a := o.GetAnnotations()
				if a["helm.sh/hook"] == "" {
					continue
				}
				hooks++
				if a["helm.sh/hook"] != "pre-delete" {
					t.Errorf("%s: helm.sh/hook %q, want pre-delete", objectID(o), a["helm.sh/hook"])
				}
				policies := strings.Split(a["helm.sh/hook-delete-policy"], ",")
				for _, p := range []string{"before-hook-creation", "hook-succeeded"} {
					if !containsString(policies, p) {
						t.Errorf("%s: helm.sh/hook-delete-policy %q lacks %s", objectID(o), a["helm.sh/hook-delete-policy"], p)
					}
				}
			}
			if hooks != 4 { // the Job, its ServiceAccount, ClusterRole and ClusterRoleBinding
				t.Errorf("%d hook objects, want the Job and its ServiceAccount, ClusterRole and ClusterRoleBinding", hooks)
			}
		})
	}

	// The docs state the default bound: timeoutSeconds + 60 s.
	for _, doc := range []string{"docs/operations.md", "manifests/charts/pool-scheduler/README.md"} {
		data, err := os.ReadFile(filepath.Join(util.RepoRoot(), doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(data)), " "), "timeoutSeconds` + 60 s") {
			t.Errorf("%s does not state the hook's bound, `timeoutSeconds` + 60 s", doc)
		}
	}
}

// hookBounds are the hook Job's fields that bound how long it runs.
type hookBounds struct {
	ActiveDeadlineSeconds, TerminationGracePeriodSeconds, BackoffLimit, TTLSecondsAfterFinished int64
	RestartPolicy, HandbackTimeout                                                              string
}

func hookJobBounds(t *testing.T, o *unstructured.Unstructured) hookBounds {
	t.Helper()
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &job); err != nil {
		t.Fatalf("%s: %v", objectID(o), err)
	}
	deref := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	b := hookBounds{
		ActiveDeadlineSeconds:         deref(job.Spec.ActiveDeadlineSeconds),
		TerminationGracePeriodSeconds: deref(job.Spec.Template.Spec.TerminationGracePeriodSeconds),
		BackoffLimit:                  -1,
		TTLSecondsAfterFinished:       -1,
		RestartPolicy:                 string(job.Spec.Template.Spec.RestartPolicy),
	}
	if job.Spec.BackoffLimit != nil {
		b.BackoffLimit = int64(*job.Spec.BackoffLimit)
	}
	if job.Spec.TTLSecondsAfterFinished != nil {
		b.TTLSecondsAfterFinished = int64(*job.Spec.TTLSecondsAfterFinished)
	}
	for _, c := range job.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--timeout=") {
				b.HandbackTimeout = a
			}
		}
	}
	return b
}
