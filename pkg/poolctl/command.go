// Package poolctl implements the poolctl command: simulate (default scheduler vs pool-scheduler,
// side by side, on an embedded control plane), audit (the same measurements on a live cluster)
// and status (which nodes NodePoolReady holds and why, and the pods waiting).
package poolctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/pool-scheduler/pool-scheduler/pkg/simulate"
	"github.com/pool-scheduler/pool-scheduler/pkg/version"
)

// NewCommand returns the poolctl command.
func NewCommand() *cobra.Command { return newCommand("poolctl") }

// PluginBinary is poolctl's name as a kubectl plugin: kubectl runs `kubectl pool ARGS` as
// `kubectl-pool ARGS`, found on PATH.
const PluginBinary = "kubectl-pool"

// CommandName is how the program was invoked, for help and usage: "kubectl pool" when argv0 is
// the plugin binary (or a link to poolctl with that name), else "poolctl".
func CommandName(argv0 string) string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == PluginBinary {
		return "kubectl pool"
	}
	return "poolctl"
}

func newCommand(name string) *cobra.Command {
	cmd := &cobra.Command{
		Use: strings.ReplaceAll(name, " ", "-"),
		// Cobra's convention for kubectl plugins: usage lines read "kubectl pool audit".
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: name},
		Short:        "See what pool-scheduler changes: simulate scenarios side by side, audit a live cluster, or see which nodes it holds and why",
		Long:         version.String(),
		SilenceUsage: true,
	}
	cmd.AddCommand(newSimulateCommand(), newAuditCommand(), newStatusCommand(), newHandbackCommand())
	return cmd
}

func newSimulateCommand() *cobra.Command {
	var (
		scenarios    []string
		out          string
		verbose      bool
		parallel     int
		progressMode string
		logFile      string
		seeds        int
		budgetFloor  bool
	)
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run scenarios under the default scheduler and under pool-scheduler and compare them",
		Long: "Starts etcd and kube-apiserver in this process, builds each scenario's cluster, runs its workload " +
			"once with the default kube-scheduler profile and once with pool-scheduler's shipped profile (the real " +
			"scheduler code), and prints a side-by-side table. Built-in scenarios: " + strings.Join(simulate.BuiltinNames(), ", ") +
			". --scenario also takes a YAML file (schema: docs/scenarios.md).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logOut, progressOut := io.Discard, cmd.ErrOrStderr()
			if logFile != "" {
				toStderr := progressOut == os.Stderr
				terminal, restore, err := redirectStderr(logFile)
				if err != nil {
					return err
				}
				defer restore()
				// Standard error is the file now: the logs go there, at klog's verbosity 0
				// unless --verbose, and the progress to the terminal.
				logOut = os.Stderr
				if toStderr {
					progressOut = terminal
				}
			}
			if verbose && logFile == "" {
				logOut = cmd.ErrOrStderr()
			} else if !verbose {
				quietKlog()
			}
			if len(scenarios) == 0 {
				scenarios = simulate.BuiltinNames()
			}
			if seeds < 1 {
				return fmt.Errorf("--seeds must be at least 1, got %d", seeds)
			}
			var loaded []*simulate.Scenario
			var groups []*simulate.SeededComparison
			for _, name := range scenarios {
				sc, err := simulate.Load(name)
				if err != nil {
					return err
				}
				if budgetFloor && sc.Maintenance != nil {
					sc.Maintenance.BudgetFloor = true
					sc.Name += " +budget-floor"
				}
				g := &simulate.SeededComparison{Scenario: sc.Name}
				for _, c := range sc.WithSeeds(seeds) {
					if c.Maintenance != nil {
						g.Seeds = append(g.Seeds, c.Maintenance.Seed)
					}
					loaded = append(loaded, c)
				}
				groups = append(groups, g)
			}
			modes, err := simulate.Modes()
			if err != nil {
				return err
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1, got %d", parallel)
			}
			progress, err := newProgress(progressOut, progressMode)
			if err != nil {
				return err
			}
			start := time.Now()
			comparisons, err := runAll(cmd.Context(), loaded, modes, parallel, simulate.Options{Log: logOut, Progress: progress.line})
			progress.done()
			if err != nil {
				return err
			}
			if seeds == 1 {
				err = simulate.WriteTable(cmd.OutOrStdout(), comparisons)
			} else {
				// The comparisons come in the order of loaded: each group's runs in a row.
				next := 0
				for _, g := range groups {
					n := max(len(g.Seeds), 1)
					g.Runs, next = comparisons[next:next+n], next+n
				}
				err = simulate.WriteSeedTable(cmd.OutOrStdout(), groups)
			}
			if err != nil {
				return err
			}
			if len(comparisons) != len(groups) {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%d scenarios (%d runs of each mode) in %v.\n", len(groups), len(comparisons), time.Since(start).Round(time.Second))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%d scenarios in %v.\n", len(comparisons), time.Since(start).Round(time.Second))
			}
			if out != "" {
				if err := writeOutputs(out, comparisons); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s and %s.\n", filepath.Join(out, "report.json"), filepath.Join(out, "report.html"))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&scenarios, "scenario", nil, "built-in scenario name or YAML file (repeatable); default: every built-in")
	cmd.Flags().StringVar(&out, "out", "", "directory to write report.json and report.html to")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show the control plane's and schedulers' logs")
	cmd.Flags().StringVar(&logFile, "log-file", "", "write everything logged to standard error (the control plane's, etcd's and the schedulers' logs) to this file instead; standard error keeps only the progress and errors (make demo)")
	cmd.Flags().StringVar(&progressMode, "progress", "auto", "auto: one status line rewritten in place when stderr is a terminal, nothing otherwise; lines: every step on its own line (make demo); none")
	cmd.Flags().IntVar(&seeds, "seeds", 1, "runs of each maintenance scenario, its seed and the next ones (batch order, surge and replacement zones): the table shows each figure's mean and range and judges the goals over them")
	cmd.Flags().BoolVar(&budgetFloor, "budget-floor", false, "run the maintenance scenarios with the budget floor on (their maintenance.budgetFloor: a PodDisruptionBudget for each workload of 3+ replicas without one, as pool-labeler spread --budget-floor keeps it)")
	cmd.Flags().IntVar(&parallel, "parallel", 3, "runs at once, each on its own embedded control plane (a run mostly waits on the scenario's timeline)")
	return cmd
}

// runAll runs every scenario under every mode, up to parallel runs at once, each on its own
// control plane, and returns the comparisons in scenario order. The first error cancels the rest.
func runAll(ctx context.Context, scenarios []*simulate.Scenario, modes []simulate.Mode, parallel int, opts simulate.Options) ([]*simulate.Comparison, error) {
	comparisons := make([]*simulate.Comparison, len(scenarios))
	for i, sc := range scenarios {
		comparisons[i] = &simulate.Comparison{Scenario: sc.Name, Description: sc.Description, Results: make([]*simulate.Result, len(modes))}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i, sc := range scenarios {
		for j, mode := range modes {
			g.Go(func() error {
				res, err := simulate.Run(ctx, sc, mode, opts)
				if err != nil {
					return fmt.Errorf("scenario %s under %s: %w", sc.Name, mode.Name, err)
				}
				if opts.Progress != nil {
					opts.Progress(fmt.Sprintf("%s / %s: done, %d of %d pods bound in %v", sc.Name, mode.Name, res.Bound, res.Pods, res.Elapsed.Round(100*time.Millisecond)))
				}
				comparisons[i].Results[j] = res
				return nil
			})
		}
	}
	return comparisons, g.Wait()
}

func writeOutputs(dir string, comparisons []*simulate.Comparison) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer, []*simulate.Comparison) error{
		"report.json": simulate.WriteJSON, "report.html": simulate.WriteHTML,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f, comparisons)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// quietKlog keeps the in-process apiserver's and schedulers' logs off the terminal, and at
// verbosity 0 whatever a linked-in package set: a higher verbosity formats several log lines per
// API request even when they are discarded.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	_ = fs.Set("v", "0")
	if f := flag.CommandLine.Lookup("v"); f != nil {
		_ = f.Value.Set("0")
	}
	klog.SetOutput(io.Discard)
}

// progress reports what the runs are doing. On a terminal (--progress=auto) it is one status
// line rewritten in place; with --progress=lines every message is a line of its own; otherwise
// (auto without a terminal, none) nothing, so logs and pipes get only the table. Runs in
// parallel share it.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	mode  string // "tty", "lines" or "none"
	last  int
	start time.Time
}

func newProgress(w io.Writer, mode string) (*progress, error) {
	p := &progress{w: w, start: time.Now()}
	switch mode {
	case "auto":
		p.mode = "none"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				p.mode = "tty"
			}
		}
	case "lines", "none":
		p.mode = mode
	default:
		return nil, fmt.Errorf("--progress: %q is not auto, lines or none", mode)
	}
	return p, nil
}

func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case "lines":
		fmt.Fprintln(p.w, s)
	case "tty":
		s = fmt.Sprintf("[%3ds] %s", int(time.Since(p.start).Seconds()), s)
		pad := ""
		if n := p.last - len(s); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(p.w, "\r%s%s", s, pad)
		p.last = len(s)
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "tty" && p.last > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.last))
	}
}

var errFindings = errors.New("findings exceed the threshold")

// Run runs poolctl, invoked as argv0 (os.Args[0]), and returns the process exit code.
func Run(ctx context.Context, argv0 string, args []string) int {
	cmd := newCommand(CommandName(argv0))
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errFindings) {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		return 1
	}
	return 0
}
