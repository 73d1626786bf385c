#!/usr/bin/env bash
# make bench: the plugins' Go microbenchmarks (5000 nodes) and the scheduler_perf suite, written
# to docs/performance.md. WORKLOADS selects scheduler_perf workloads (default 1000Nodes; add
# 5000Nodes for the full goals), COUNT the runs per case (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
WORKLOADS=${WORKLOADS:-1000Nodes}
COUNT=${COUNT:-3}
ART=$PWD/artifacts/bench
rm -rf "$ART" && mkdir -p "$ART"
export PATH="$PWD/bin:$PATH"
# Measure optimised code: drop make's test-build flags (no inlining) if inherited.
GOFLAGS="${GOFLAGS:-}"
GOFLAGS="${GOFLAGS//\'-gcflags=all=-l -dwarf=false\'/}"
export GOFLAGS="${GOFLAGS//-gcflags=all=-l/}"

echo "== microbenchmarks" >&2
# Log records of the fakes the benchmarks build (klog writes to the same stream) can land in the
# middle of a benchmark's line; they are cut out so that benchstat parses every result.
go test -run='^$' -bench=. -benchmem -count="$COUNT" ./pkg/plugins/... \
  | perl -0pe 's/[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\] [^\n]*\n//g' | tee "$ART/micro.txt" >&2

echo "== scheduler_perf ($WORKLOADS, count $COUNT)" >&2
pattern="BenchmarkPerfScheduling/.*/($(echo "$WORKLOADS" | tr ' ,' '||'))\$"
ARTIFACTS=$ART go test ./test/perf -run='^$' -bench="$pattern" -benchtime=1ns -count="$COUNT" -timeout=120m \
  -perf-scheduling-label-filter=performance -data-items-dir="$ART" | tee "$ART/perf.txt" >&2

echo "== churn (count $COUNT)" >&2
go test ./test/perf -run='^$' -bench='^BenchmarkChurn$' -benchtime=1x -count="$COUNT" -timeout=60m 2>/dev/null \
  | grep -E '^BenchmarkChurn' | tee "$ART/churn.txt" >&2

go run ./hack/perfreport -artifacts "$ART" > "$ART/perf.md"
# Churn: label-to-bind latency of gated pods (mean over runs, and the worst run's p99).
churn_md=$(awk '
  { for (i = 1; i < NF; i++) { if ($(i+1) == "label-to-bind-p50-ms") { p50 += $i }
                               if ($(i+1) == "label-to-bind-p99-ms") { p99 += $i; if ($i > worst) worst = $i } }
    n++ }
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
  echo "Measured $(date -u +%F) on $(nproc) cores, $(go version | cut -d' ' -f3), k8s.io/kubernetes $(grep '^KUBE_VERSION' hack/versions.env | cut -d= -f2)."
  echo "Command: \`WORKLOADS=\"$WORKLOADS\" COUNT=$COUNT make bench\`."
  cat "$ART/perf.md"
  echo
  echo "### Churn: gated pods, label-to-bind latency (\`BenchmarkChurn\`, \`test/perf/config/churn.yaml\`)"
  echo
  echo "| runs | p50 (mean) | p99 (mean) | p99 (worst run) |"
  echo "|---|---|---|---|"
  echo "$churn_md"
  echo
  echo "### Plugin microbenchmarks (5000 nodes per op; see each plugin's README)"
  echo
  echo '```'
  cat "$ART/micro-benchstat.txt"
  echo '```'
} > docs/performance.md.new
mv docs/performance.md.new docs/performance.md
echo "wrote docs/performance.md" >&2
