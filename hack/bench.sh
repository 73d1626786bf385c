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
export GOFLAGS="${GOFLAGS//-gcflags=all=-l/}"

echo "== microbenchmarks" >&2
go test -run='^$' -bench=. -benchmem -count="$COUNT" ./pkg/plugins/... | tee "$ART/micro.txt" >&2

echo "== scheduler_perf ($WORKLOADS, count $COUNT)" >&2
pattern="BenchmarkPerfScheduling/.*/($(echo "$WORKLOADS" | tr ' ,' '||'))\$"
ARTIFACTS=$ART go test ./test/perf -run='^$' -bench="$pattern" -benchtime=1ns -count="$COUNT" -timeout=120m \
  -perf-scheduling-label-filter=performance -data-items-dir="$ART" | tee "$ART/perf.txt" >&2

go run ./hack/perfreport -artifacts "$ART" > "$ART/perf.md"
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145340-8cd2bdc1c2ed "$ART/micro.txt" > "$ART/micro-benchstat.txt" 2>/dev/null || cp "$ART/micro.txt" "$ART/micro-benchstat.txt"

{
  sed -n '1,/^<!-- results -->$/p' docs/performance.md
  echo
  echo "Measured $(date -u +%F) on $(nproc) cores, $(go version | cut -d' ' -f3), k8s.io/kubernetes $(grep '^KUBE_VERSION' hack/versions.env | cut -d= -f2)."
  echo "Command: \`WORKLOADS=\"$WORKLOADS\" COUNT=$COUNT make bench\`."
  cat "$ART/perf.md"
  echo
  echo "### Plugin microbenchmarks (5000 nodes per op; see each plugin's README)"
  echo
  echo '```'
  cat "$ART/micro-benchstat.txt"
  echo '```'
} > docs/performance.md.new
mv docs/performance.md.new docs/performance.md
echo "wrote docs/performance.md" >&2
