package integration

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/test/util"
)

// violationsOf names, per built-in scenario, the violation the default scheduler must show: the
// field report the scenario models.
var violationsOf = map[string]func(*simulate.Result) int{
	"late-labels": func(r *simulate.Result) int { return len(r.Report.PodsOnNotReadyNodes) },
	"system-pool": func(r *simulate.Result) int {
		return len(r.Report.UserPodsOnSystemNodes) + len(r.Report.LoadBalancerMismatches)
	},
	"replica-spread": func(r *simulate.Result) int { return r.Report.ConfinedWorkloads(1) },
}

// TestSimulateBuiltinScenarios runs every built-in scenario under both profiles on the embedded
// control plane, as `make demo` does: the default scheduler shows the field report's problem,
// pool-scheduler shows no violation at all. It then renders the HTML report in headless Chromium.
func TestSimulateBuiltinScenarios(t *testing.T) {
	modes, err := simulate.Modes()
	if err != nil {
		t.Fatal(err)
	}
	var comparisons []*simulate.Comparison
	for _, name := range simulate.BuiltinNames() {
		sc, err := simulate.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Maintenance != nil {
			continue // TestSimulateMaintenance runs the short one; the 100-node one is demo's
		}
		c := &simulate.Comparison{Scenario: sc.Name, Description: sc.Description}
		for _, mode := range modes {
			res, err := simulate.Run(context.Background(), sc, mode, simulate.Options{})
			if err != nil {
				t.Fatalf("%s under %s: %v", name, mode.Name, err)
			}
			c.Results = append(c.Results, res)
		}
		comparisons = append(comparisons, c)
		def, pool := c.Results[0], c.Results[1]
		if check := violationsOf[name]; check == nil {
			t.Errorf("no expectation for built-in scenario %s", name)
		} else if check(def) == 0 {
			t.Errorf("%s: the default scheduler showed none of the scenario's problem", name)
		}
		if v := simulate.Violations(pool); v != 0 {
			t.Errorf("%s: pool-scheduler has %d violations: %+v", name, v, pool.Report)
		}
		if pool.Bound != pool.Pods {
			t.Errorf("%s: pool-scheduler bound %d of %d pods: %+v", name, pool.Bound, pool.Pods, pool.Report.PendingPods)
		}
		if sc.OptInByLabel {
			// Every pod outside kube-system was created without schedulerName.
			want := 0
			for _, w := range sc.Workloads {
				if w.Namespace != "kube-system" {
					want += w.ReplicaSets * w.Replicas
				}
			}
			if pool.OptedIn != want || def.OptedIn != 0 {
				t.Errorf("%s: pods given to pool-scheduler by namespace label: %d (default run %d), want %d (and 0)", name, pool.OptedIn, def.OptedIn, want)
			}
		}
	}
	var table bytes.Buffer
	if err := simulate.WriteTable(&table, comparisons); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())

	out := filepath.Join(util.RepoRoot(), "_output", "simulate")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(out, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := simulate.WriteHTML(f, comparisons); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom := renderInChromium(t, page, filepath.Join(out, "report.png"), "late-labels", "system-pool", "replica-spread", "<rect", `class="detail"`)
	// Every spread dimension is charted under every mode, with its legend.
	for _, dim := range comparisons[0].Results[0].Report.Dimensions {
		for _, r := range comparisons[0].Results {
			if want := fmt.Sprintf(`data-dimension="%s" data-mode="%s"`, dim.Name, r.Mode); !strings.Contains(dom, want) {
				t.Errorf("rendered page has no chart %s", want)
			}
		}
		if want := fmt.Sprintf(`class="legend" data-dimension="%s"`, dim.Name); !strings.Contains(dom, want) {
			t.Errorf("rendered page has no legend for %s", dim.Name)
		}
	}
}

// renderInChromium loads the page in headless Chromium (Debian's package; .ci/run installs it),
// checks the DOM it built (charts with axes and legends, and the strings in want) and that the
// console logged no error, saves a screenshot, and returns the DOM.
func renderInChromium(t *testing.T, page, screenshot string, want ...string) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (apt-get install chromium; .ci/run installs it): %v", err)
	}
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run"}
	// One render may be tried twice: a headless browser that hangs on a loaded machine is not
	// the report's fault, and a second hang still fails the test, within minutes.
	run := func(extra ...string) (string, string) {
		out, logs, err := renderOnce(chromium, append(flags, "--user-data-dir="+t.TempDir()), page, extra)
		if err != nil {
			t.Logf("chromium %v: %v; trying once more", extra, err)
			out, logs, err = renderOnce(chromium, append(flags, "--user-data-dir="+t.TempDir()), page, extra)
		}
		if err != nil {
			t.Fatalf("chromium %v: %v", extra, err)
		}
		return out, logs
	}
	dom, logs := run("--dump-dom", "--enable-logging=stderr", "--v=0")
	for _, want := range append([]string{"<svg", "pool-scheduler", `class="axis y-axis"`, `class="axis x-axis"`, `class="legend"`}, want...) {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "CONSOLE") && (strings.Contains(line, "Uncaught") || strings.Contains(line, "Error")) {
			t.Errorf("console error: %s", line)
		}
	}
	run("--screenshot="+screenshot, "--window-size=1400,4000")
	img, err := os.Open(screenshot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer img.Close()
	cfg, err := png.DecodeConfig(img)
	if err != nil || cfg.Width < 1000 {
		t.Fatalf("screenshot %s is not a page-sized PNG: %v %+v", screenshot, err, cfg)
	}
	t.Logf("screenshot: %s (%dx%d)", screenshot, cfg.Width, cfg.Height)
	return dom
}

// renderOnce runs headless Chromium once on page, for at most two minutes.
func renderOnce(chromium string, flags []string, page string, extra []string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, chromium, append(append(append([]string{}, flags...), extra...), "file://"+page)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Chromium forks helpers (zygote, renderer) that inherit its stdout and stderr: killing
	// the browser alone at the timeout leaves them holding the pipes, and Wait would block
	// until the suite's own timeout. So the browser gets a process group of its own, the
	// timeout kills the group, and Wait stops reading the pipes soon after.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind by a browser that exited
	}
	if err != nil {
		return "", "", fmt.Errorf("%w (context: %v)\n%s", err, ctx.Err(), stderr.String())
	}
	return stdout.String(), stderr.String(), nil
}
