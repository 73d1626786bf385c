package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// TestDemoPrintsProgressAndTableOnly runs the built poolctl as make demo does (hack/demo.sh:
// --progress=lines --log-file) on one built-in scenario: standard output holds the table and
// its summary only, no wider than simulate.TableWidth; standard error the progress lines only;
// the control planes' and schedulers' logs, which are there (kube-apiserver logs at klog's
// verbosity 0), are in the log file.
func TestDemoPrintsProgressAndTableOnly(t *testing.T) {
	poolctl := util.ToolBinary(t, "poolctl", "POOLCTL_BINARY")
	demo, err := os.ReadFile(filepath.Join(util.RepoRoot(), "hack", "demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`bin/poolctl simulate .*--progress=lines --log-file `).Match(demo) {
		t.Fatalf("hack/demo.sh no longer runs `bin/poolctl simulate ... --progress=lines --log-file ...`; this test runs what it runs")
	}

	logFile := filepath.Join(t.TempDir(), "demo", "poolctl.log")
	cmd := exec.Command(poolctl, "simulate", "--scenario=late-labels", "--parallel=2", "--progress=lines", "--log-file", logFile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("poolctl simulate: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	table := regexp.MustCompile(`^(|SCENARIO \S+ .*| +\S.*|\d+ scenarios in \S+\.)$`)
	for i, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		if !table.MatchString(line) {
			t.Errorf("stdout line %d is not the table's: %q", i+1, line)
		}
		if len(line) > simulate.TableWidth {
			t.Errorf("stdout line %d is %d columns wide, more than %d: %q", i+1, len(line), simulate.TableWidth, line)
		}
	}
	progress := regexp.MustCompile(`^late-labels / [a-z-]+: `)
	for i, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
		if !progress.MatchString(line) {
			t.Errorf("stderr line %d is not a progress line: %q", i+1, line)
		}
	}
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if klogLine := regexp.MustCompile(`(?m)^[IWE]\d{4} \d\d:\d\d:\d\d`); !klogLine.Match(logs) {
		t.Errorf("the log file %s has no klog line: were the logs diverted, or not written at all?\n%s", logFile, tail(string(logs), 30))
	}
}

// TestDemoSeeds runs a maintenance scenario with two seeds as make demo runs them (--seeds):
// standard output holds one table for the scenario with each figure's mean and range over
// seeds 43 and 44 under both schedulers, the goals judged over them, and the summary line.
func TestDemoSeeds(t *testing.T) {
	poolctl := util.ToolBinary(t, "poolctl", "POOLCTL_BINARY")
	demo, err := os.ReadFile(filepath.Join(util.RepoRoot(), "hack", "demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`bin/poolctl simulate .*--seeds "\$seeds"`).Match(demo) {
		t.Fatalf("hack/demo.sh no longer runs `bin/poolctl simulate ... --seeds`; this test runs what it runs")
	}
	cmd := exec.Command(poolctl, "simulate", "--scenario=blue-green-small", "--seeds=2", "--parallel=4", "--progress=none",
		"--log-file", filepath.Join(t.TempDir(), "poolctl.log"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("poolctl simulate --seeds=2: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^SCENARIO blue-green-small, 2 seeds \(43-44\): mean \(range\) +DEFAULT +POOL-SCHEDULER$`),
		regexp.MustCompile(`(?m)^  evictions per replica +1\.00 \(1\.00-1\.00\) +1\.00 \(1\.00-1\.00\)$`),
		regexp.MustCompile(`(?m)^  goal: evictions per replica <= floor 1\.00 \+ 0\.02 and <= default's +1\.00 \(1\.00-1\.00\) +met: 1\.00 \(1\.00-1\.00\)$`),
		regexp.MustCompile(`(?m)^1 scenarios \(2 runs of each mode\) in \S+\.$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("stdout lacks %s", want)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		if len(line) > simulate.TableWidth {
			t.Errorf("stdout line %d is %d columns wide, more than %d: %q", i+1, len(line), simulate.TableWidth, line)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
