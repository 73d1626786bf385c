#!/usr/bin/env bash
# make bench: the plugins' Go microbenchmarks (per-node cost at 5000 and 15 000 nodes; memory per
# node and the replica index's per pod, with heap profiles in artifacts/bench), the scheduler_perf
# suite and the installed benchmark (test/installed), written to docs/performance.md.
#   SUITES     what to run: "scheduler_perf" (microbenchmarks, scheduler_perf, churn) and/or
#              "installed" (default both); each rewrites only its own part of the document.
#   WORKLOADS  scheduler_perf workloads (default 1000Nodes; add 5000Nodes for the full goals).
#   INSTALLED  installed-benchmark workloads (default "500Nodes 5000Nodes"; also smoke).
#   ROUNDS     rounds of every scheduler per installed run (default 1).
#   COUNT      runs per scheduler_perf case and microbenchmark (default 3).
#   MAX_COUNT  scheduler_perf runs at most (default COUNT): after COUNT runs, pairs go on until the
#              95% interval of every pool-scheduler / default ratio (hack/perfreport, per pair) is
#              at most WIDTH wide (default 0.06), or MAX_COUNT runs are done.
#   CASES      scheduler_perf test cases (default every case that defines the workload; e.g.
#              "default pool-scheduler" for the #18 pair alone).
#   INSTALLED_COUNT  installed runs, each on a new cluster (default 1; ROUNDS is the cheaper way
#   LINE       a release line other than the default (e.g. 1.36, lines/k8s-<line>; make sets the
#              line's GOFLAGS): scheduler_perf only (SUITES=scheduler_perf), written between
#              docs/performance.md's results-k8s<line> markers; no microbenchmarks or churn.
#              to repeat: the rounds share one cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
SUITES=${SUITES:-scheduler_perf installed}
WORKLOADS=${WORKLOADS:-1000Nodes}
INSTALLED=${INSTALLED:-500Nodes 5000Nodes}
ROUNDS=${ROUNDS:-1}
COUNT=${COUNT:-3}
MAX_COUNT=${MAX_COUNT:-$COUNT}
WIDTH=${WIDTH:-0.06}
INSTALLED_COUNT=${INSTALLED_COUNT:-1}
for s in $SUITES; do
  case $s in scheduler_perf|installed) ;; *) echo "SUITES: unknown suite $s (scheduler_perf, installed)" >&2; exit 2 ;; esac
done
runs() { [[ " $SUITES " == *" $1 "* ]]; }
LINE=${LINE:-}
KUBE_VERSION=$(grep '^KUBE_VERSION' hack/versions.env | cut -d= -f2)
if [[ -n $LINE ]]; then
  [[ $SUITES == scheduler_perf ]] || { echo "LINE=$LINE: set SUITES=scheduler_perf (the installed benchmark runs the default line)" >&2; exit 2; }
  [[ -f lines/k8s-$LINE/versions.env ]] || { echo "LINE=$LINE: no lines/k8s-$LINE/versions.env" >&2; exit 2; }
  KUBE_VERSION=$(grep '^KUBE_VERSION' "lines/k8s-$LINE/versions.env" | cut -d= -f2)
  grep -q "^<!-- results-k8s$LINE:begin -->$" docs/performance.md || { echo "LINE=$LINE: no results-k8s$LINE markers in docs/performance.md" >&2; exit 2; }
fi
ART=$PWD/artifacts/bench
rm -rf "$ART" && mkdir -p "$ART"
machine="$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
export PATH="$PWD/bin:$PATH"
# Measure optimised code: drop make's test-build flags (no inlining) if inherited.
GOFLAGS="${GOFLAGS:-}"
GOFLAGS="${GOFLAGS//\'-gcflags=all=-l -dwarf=false\'/}"
export GOFLAGS="${GOFLAGS//-gcflags=all=-l/}"

if runs installed; then
  echo "== installed ($INSTALLED, $ROUNDS round(s), count $INSTALLED_COUNT)" >&2
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  pattern="^BenchmarkInstalled\$/^($(echo "$INSTALLED" | tr ' ,' '||'))\$"
  ARTIFACTS=$ART go test ./test/installed -run='^$' -bench="$pattern" -benchtime="${ROUNDS}x" -count="$INSTALLED_COUNT" -timeout=180m \
    | tee "$ART/installed.txt" >&2
  {
    echo "Measured $(date -u +%F) on $machine, $(go version | cut -d' ' -f3), k8s.io/kubernetes $KUBE_VERSION;"
    echo "load average (1, 5, 15 min) $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after."
    echo "Command: \`SUITES=\"$SUITES\" INSTALLED=\"$INSTALLED\" ROUNDS=$ROUNDS INSTALLED_COUNT=$INSTALLED_COUNT make bench\`."
    echo
    go run ./hack/installedreport < "$ART/installed.txt"
  } > "$ART/installed.md"
  # Replace what lies between the installed markers.
  INSTALLED_MD=$ART/installed.md perl -0pi -e '
    BEGIN { open my $f, "<", $ENV{INSTALLED_MD} or die; local $/; $new = <$f> }
    s/(<!-- installed:begin -->\n).*?(<!-- installed:end -->)/$1\n$new\n$2/s or die "no installed markers in docs/performance.md\n"' docs/performance.md
  echo "wrote the installed results to docs/performance.md" >&2
fi
runs scheduler_perf || exit 0

if [[ -z $LINE ]]; then
echo "== microbenchmarks" >&2
# Log records of the fakes the benchmarks build (klog writes to the same stream) can land in the
# middle of a benchmark's line; they are cut out so that benchstat parses every result.
# With ARTIFACTS set, the memory benchmarks (BenchmarkMemory, BenchmarkReplicaIndexMemory) write
# heap profiles before and after building what they measure (test/util/plugintest.HeapGrowth).
ARTIFACTS=$ART go test -run='^$' -bench=. -benchmem -count="$COUNT" ./pkg/plugins/... \
  | perl -0pe 's/[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\] [^\n]*\n//g' | tee "$ART/micro.txt" >&2
# Memory: bytes per node of each plugin and of the three together, and of the replica index per
# pod (means over the runs), from the benchmarks' own metrics.
mem_nodes_md=$(awk '
  /^pkg: / { n = split($2, p, "/"); pkg = p[n] }
  $1 ~ /^BenchmarkMemory\/nodes=/ {
    size = $1; sub(/^BenchmarkMemory\/nodes=/, "", size); sub(/-[0-9]+$/, "", size)
    sizes[size] = 1
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "plugin-bytes/node") { per[pkg, size] += $i; runs[pkg, size]++ }
      if ($(i+1) == "plugin-bytes") { total[pkg, size] += $i }
    }
  }
  END {
    split("nodepoolready systempoolguard domainspread nodepoolaffinity", plugins, " ")
    for (size in sizes) {
      row = "| " size; sum = 0; all = 0
      for (j = 1; j <= 4; j++) {
        k = plugins[j]
        if (!runs[k, size]) { row = row " | -"; continue }
        row = row sprintf(" | %.0f B", per[k, size] / runs[k, size])
        sum += per[k, size] / runs[k, size]; all += total[k, size] / runs[k, size]
      }
      printf "%s | %.0f B | %.1f MB |\n", row, sum, all / 1e6
    }
  }' "$ART/micro.txt" | sort -t'|' -k2 -n)
mem_pods_md=$(awk '
  $1 ~ /^BenchmarkReplicaIndexMemory\/pods=/ {
    size = $1; sub(/^BenchmarkReplicaIndexMemory\/pods=/, "", size); sub(/-[0-9]+$/, "", size)
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "replica-index-bytes/pod") { per[size] += $i; runs[size]++ }
      if ($(i+1) == "index-bytes") { total[size] += $i }
    }
  }
  END { for (s in runs) printf "| %s | %.1f MB | %.0f B |\n", s, total[s] / runs[s] / 1e6, per[s] / runs[s] }' "$ART/micro.txt" | sort -t'|' -k2 -n)
# What the largest size's state is made of, by allocation site (the last run's profiles).
mem_top() {
  local largest
  largest=$(ls "$ART"/heap-"$1"-*.pprof 2>/dev/null | grep -v -- '-base\.pprof$' | sort -V | tail -1 || true)
  [[ -n $largest ]] || return 0
  echo "$(basename "$largest" .pprof):"
  { go tool pprof -sample_index=inuse_space -diff_base "${largest%.pprof}-base.pprof" -top -nodecount=12 "$largest" 2>/dev/null \
    | awk '$1 ~ /^[0-9.]+[kMG]?B$/ { flat = $1; for (i = 1; i <= 5; i++) sub(/^ *[^ ]+/, ""); sub(/^ +/, "")
                                    gsub(/github\.com\/pool-scheduler\/pool-scheduler\//, ""); printf "  %9s  %s\n", flat, $0 }'; } \
    || echo "  (go tool pprof failed on $largest)"
}
mem_top_md=$(for m in NodePoolReady SystemPoolGuard DomainSpread NodePoolAffinity replicaindex; do mem_top "$m"; done)
fi

echo "== scheduler_perf ($WORKLOADS, count $COUNT${CASES:+, cases $CASES})" >&2
# Every case of every workload and run in a process of its own: -count repeats a case back to
# back, and one process for several cases or workloads runs the later ones after the earlier
# ones' apiservers and heaps (15 000 nodes' worth), which slowed them here by more than the
# effects measured. The machine's speed drifts within minutes, so default and pool-scheduler, the
# pair the goals compare, run back to back at the end of each run's list, the list reversed every
# other run (pool-scheduler first in even runs). The test binary is built once (go test would link
# it again for every process).
# The cases that define a workload (top-level "- name:" entries and their workloads'
# "  - name:" entries), grouped by family (the name before its scheduler: "pools-pinned-" for
# "pools-pinned-default"; hack/perfreport pairs within a family), pool-scheduler's case and the
# default's last in each family, so those two run back to back.
cases_of() {
  awk -v w="$1" '/^- name: / { tc = $3 } /^  - name: / && $3 == w { print tc }' test/perf/config/performance-config.yaml \
    | awk '{ fam = $0; rank = 0
             if (match($0, /(^|-)default$/)) { rank = 1; fam = substr($0, 1, RSTART - 1 + (RSTART > 1)) }
             else if (match($0, /(^|-)pool-scheduler(-.*)?$/)) { rank = 2; fam = substr($0, 1, RSTART - 1 + (RSTART > 1)) }
             else if (match($0, /(^|-)(floor|intree-equivalent|anti-affinity|degraded-affinity|degraded)$/)) { fam = substr($0, 1, RSTART - 1 + (RSTART > 1)) }
             print (fam == "" ? "_" : fam), rank, NR, $0 }' \
    | sort -k1,1 -k2,2n -k3,3n | cut -d' ' -f4
}
go test -c -o "$ART/perf.test" ./test/perf
# A case that fails (scheduler_perf gives up on pods not scheduled in time) is listed in the
# document, and the other cases still run.
failed=()
: > "$ART/perf.txt"
perf_run() {
  local run=$1
  echo "-- scheduler_perf run $run (at least $COUNT, at most $MAX_COUNT)" >&2
  for w in $WORKLOADS; do
    cases=()
    for tc in $(cases_of "$w"); do
      if [[ -z ${CASES:-} || " $CASES " == *" $tc "* ]]; then cases+=("$tc"); fi
    done
    [[ ${#cases[@]} -gt 0 ]] || { echo "WORKLOADS: no test case defines $w${CASES:+ among $CASES}" >&2; exit 2; }
    for i in "${!cases[@]}"; do
      tc=${cases[i]}
      (( run % 2 )) || tc=${cases[${#cases[@]} - 1 - i]}
      echo "-- $w/$tc (run $run)" >&2
      # A CPU profile per case, workload and run (the whole harness: apiserver and scheduler)
      # shows where the cases' cycles differ:
      # `go tool pprof -top -focus=pool-scheduler $ART/perf-<case>-<workload>-run1.cpu.pprof`.
      (cd test/perf && ARTIFACTS=$ART "$ART/perf.test" -test.run='^$' -test.bench="BenchmarkPerfScheduling/^$tc\$/^$w\$" \
        -test.benchtime=1ns -test.count=1 -test.timeout=120m -test.cpuprofile "$ART/perf-$tc-$w-run$run.cpu.pprof" \
        -perf-scheduling-label-filter=performance -data-items-dir="$ART") | tee -a "$ART/perf.txt" >&2 \
        || { echo "-- $w/$tc (run $run) FAILED; the runs go on" >&2; failed+=("$w/$tc (run $run)"); }
      # scheduler_perf names its result file by the second it ends: one case that ends within the
      # second another began (a workload a case does not define ends at once) would overwrite it.
      for f in "$ART"/BenchmarkPerfScheduling_*Z.json; do
        if [[ -e $f ]]; then mv "$f" "${f%.json}-$tc-$w-run$run.json"; fi
      done
    done
  done
}
# COUNT runs, then more while an interval is wider than WIDTH (perfreport -converged exits
# non-zero), up to MAX_COUNT.
runs_done=0
while :; do
  runs_done=$((runs_done + 1))
  perf_run "$runs_done"
  ((runs_done >= COUNT)) || continue
  ((runs_done < MAX_COUNT)) || break
  if go run ./hack/perfreport -artifacts "$ART" -converged "$WIDTH" >/dev/null 2>"$ART/converged.txt"; then
    break
  fi
  echo "-- after $runs_done runs: $(cat "$ART/converged.txt"); another run" >&2
done

# Where default's and pool-scheduler's processes spend their CPU, from the profiles above: the
# whole process (apiserver, etcd client, harness and scheduler), our plugins' own stacks, the
# framework's Filter loop and Score phase (every plugin's calls and the framework's cost per
# plugin and node) and the garbage collector's mark workers; means over the runs.
secs() { awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
  f = (u == "ms") ? 0.001 : (u == "us" || u == "µs") ? 1e-6 : (u == "mins") ? 60 : (u == "hrs") ? 3600 : 1; printf "%.3f", n * f }'; }
# CPU of the samples whose stack holds a frame matching $2 (the goroutines a parallel phase starts
# hold the phase's closures, not the phase's function: RunScorePlugins.func2, ...).
focused() {
  secs "$(go tool pprof -top -nodecount=100000 -focus="$2" "$1" 2>/dev/null | awk '/Showing nodes accounting for/ { v = $5; sub(/,$/, "", v); print v; exit }')"
}
profile_row() {
  local f=$1
  echo "$(secs "$(go tool pprof -top -nodecount=1 "$f" 2>/dev/null | awk '/Total samples =/ { print $(NF-1); exit }')")" \
    "$(focused "$f" 'pool-scheduler/pkg/plugins')" "$(focused "$f" '\.RunFilterPluginsWithNominatedPods$')" \
    "$(focused "$f" '\.RunScorePlugins(\.func[0-9.]+)?$')" "$(focused "$f" '^runtime\.gcBgMarkWorker$')"
}
profile_md=$(for w in $WORKLOADS; do
  for tc in $(cases_of "$w"); do
    rows=$(for f in "$ART"/perf-"$tc"-"$w"-run*.cpu.pprof; do if [[ -e $f ]]; then profile_row "$f"; fi; done)
    [[ -n $rows ]] || continue
    echo "$rows" | awk -v w="$w" -v tc="$tc" '{ n++; for (i = 1; i <= 5; i++) s[i] += $i }
      END { printf "| %s | %s | %d | %.1f s | %.2f s (%.1f%%) | %.1f s | %.1f s | %.1f s |\n", w, tc, n,
              s[1]/n, s[2]/n, 100*s[2]/s[1], s[3]/n, s[4]/n, s[5]/n }'
  done
done)

if [[ -z $LINE ]]; then
echo "== churn (count $COUNT)" >&2
# The test binary built above, run directly: go test would print the binary's stderr on its
# stdout, and from the second run on klog writes the embedded control plane's records to stderr,
# in the middle of a result line (one line of -count=N survived here). Run like this, stderr is
# only klog's and is dropped, and stdout holds the benchmark's lines.
(cd test/perf && "$ART/perf.test" -test.run='^$' -test.bench='^BenchmarkChurn$' -test.benchtime=1x -test.count="$COUNT" -test.timeout=60m 2>/dev/null) \
  | grep -E '^BenchmarkChurn.*label-to-bind' | tee "$ART/churn.txt" >&2

fi
go run ./hack/perfreport -artifacts "$ART" > "$ART/perf.md"
if [[ ${#failed[@]} -gt 0 ]]; then
  printf -v list '%s, ' "${failed[@]}"
  { echo; echo "Failed, no result (see artifacts/bench/perf.txt): ${list%, }."; } >> "$ART/perf.md"
fi
if [[ -n $LINE ]]; then
  {
    echo "Measured $(date -u +%F) on $machine, $(go version | cut -d' ' -f3), k8s.io/kubernetes $KUBE_VERSION (the $LINE line)."
    echo "Command: \`LINE=$LINE SUITES=scheduler_perf WORKLOADS=\"$WORKLOADS\"${CASES:+ CASES=\"$CASES\"} COUNT=$COUNT MAX_COUNT=$MAX_COUNT WIDTH=$WIDTH make bench\` ($runs_done scheduler_perf runs)."
    cat "$ART/perf.md"
    echo
    echo "Mean CPU per run (columns as in the default line's \"Where the CPU goes\", below):"
    echo
    echo "| workload | case | runs | process | our plugins | Filter loop | Score phase | GC mark |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "$profile_md"
  } > "$ART/line.md"
  LINE="$LINE" LINE_MD=$ART/line.md perl -0pi -e '
    BEGIN { open my $f, "<", $ENV{LINE_MD} or die; local $/; $new = <$f> }
    s/(<!-- results-k8s\Q$ENV{LINE}\E:begin -->\n).*?(<!-- results-k8s\Q$ENV{LINE}\E:end -->)/$1\n$new\n$2/s or die "no results-k8s$ENV{LINE} markers\n"' docs/performance.md
  echo "wrote the $LINE line's results to docs/performance.md" >&2
  exit 0
fi
# Churn: label-to-bind latency of gated pods (mean over runs, and the worst run's p99).
churn_md=$(awk '
  { for (i = 1; i < NF; i++) { if ($(i+1) == "label-to-bind-p50-ms") { p50 += $i; n++ }
                               if ($(i+1) == "label-to-bind-p99-ms") { p99 += $i; if ($i > worst) worst = $i } } }
  END { if (n) printf "| %d | %.0f ms | %.0f ms | %.0f ms |\n", n, p50 / n, p99 / n, worst }' "$ART/churn.txt")
# benchstat summarises the runs (median and confidence interval per benchmark); the raw lines stay
# in $ART/micro.txt. Without it (no module proxy), the raw lines go into the document, saying so.
BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
if ! go run "$BENCHSTAT" "$ART/micro.txt" > "$ART/micro-benchstat.txt" 2> "$ART/benchstat.err"; then
  echo "benchstat failed (see $ART/benchstat.err); the document gets the raw benchmark lines" >&2
  { echo "(benchstat unavailable: $(head -1 "$ART/benchstat.err"); raw go test output)"; cat "$ART/micro.txt"; } > "$ART/micro-benchstat.txt"
fi

{
  sed -n '1,/^<!-- results -->$/p' docs/performance.md
  echo
  echo "Measured $(date -u +%F) on $machine, $(go version | cut -d' ' -f3), k8s.io/kubernetes $KUBE_VERSION."
  echo "Command: \`SUITES=\"$SUITES\" WORKLOADS=\"$WORKLOADS\"${CASES:+ CASES=\"$CASES\"} COUNT=$COUNT MAX_COUNT=$MAX_COUNT WIDTH=$WIDTH make bench\` ($runs_done scheduler_perf runs)."
  cat "$ART/perf.md"
  echo
  echo "### Where the CPU goes (the runs' CPU profiles, \`artifacts/bench/perf-<case>-<workload>-run<n>.cpu.pprof\`)"
  echo
  echo "Mean CPU per run of the whole harness process (apiserver, harness and scheduler), of pool-scheduler's plugins' own stacks (\`-focus=pool-scheduler/pkg/plugins\`), of the framework's Filter loop (\`RunFilterPluginsWithNominatedPods\`, every Filter plugin plus the framework's cost per plugin and node) and Score phase (\`RunScorePlugins\` and the closures it runs in parallel), and of the garbage collector's mark workers (\`gcBgMarkWorker\`):"
  echo
  echo "| workload | case | runs | process | our plugins | Filter loop | Score phase | GC mark |"
  echo "|---|---|---|---|---|---|---|---|"
  echo "$profile_md"
  echo
  echo "### Churn: gated pods, label-to-bind latency (\`BenchmarkChurn\`, \`test/perf/config/churn.yaml\`)"
  echo
  echo "| runs | p50 (mean) | p99 (mean) | p99 (worst run) |"
  echo "|---|---|---|---|"
  echo "$churn_md"
  echo
  echo "### Plugin memory (\`BenchmarkMemory\`, \`BenchmarkReplicaIndexMemory\`; method above the results)"
  echo
  echo "Live heap the plugins hold per node once every node has been evaluated (shipped args, scheduler_perf's nodes), mean of $COUNT runs:"
  echo
  echo "| nodes | NodePoolReady | SystemPoolGuard | DomainSpread | NodePoolAffinity (pool index; 30 pools) | all four, per node | all four, total |"
  echo "|---|---|---|---|---|---|---|"
  echo "$mem_nodes_md"
  echo
  echo "DomainSpread's replica index per pod (ReplicaSet pods, 5 per set, over 15 000 nodes):"
  echo
  echo "| pods | index | per pod |"
  echo "|---|---|---|"
  echo "$mem_pods_md"
  echo
  echo "Allocation sites of that memory at the largest size (\`go tool pprof -sample_index=inuse_space -diff_base <name>-base.pprof -top <name>.pprof\`, profiles in \`artifacts/bench\`; flat bytes, with the live objects of the function that allocated them):"
  echo
  echo '```'
  echo "$mem_top_md"
  echo '```'
  echo
  echo "### Plugin microbenchmarks (5000 nodes per op unless a sub-benchmark names the count; see each plugin's README)"
  echo
  echo '```'
  cat "$ART/micro-benchstat.txt"
  echo '```'
} > docs/performance.md.new
mv docs/performance.md.new docs/performance.md
echo "wrote docs/performance.md" >&2
