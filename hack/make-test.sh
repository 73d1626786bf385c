#!/usr/bin/env bash
# make test's orchestration (the Makefile's test target runs it; MAKE and OTHER_LINES come from
# there). First the unit tests, the alert rules, the default line's fuzz smoke and bin/etcd, which
# every line's suites run (built once, so that two makes never build it at once). Then every
# other release line's part (make line-all: its integration suite and fuzz smoke, its
# line-dependent unit tests and e2e suite) in the background, each with its own log
# (_output/line-k8s<line>.log), beside the default line's integration suite, end-to-end, the
# image, the READMEs, signing and the scheduler_perf smoke (_output/test-default-line.log). An
# integration suite keeps about one core busy and the e2e suites mostly wait on control planes,
# processes and Leases, so on 2 cores the two lines side by side take little more than one; run
# serially the 1.36 line would add about 30 minutes (docs/compatibility.md has the figures).
# Exit status: non-zero if any part failed; the last lines then name what failed in each log, so
# a CI view that shows only the end of the output still names the test. Each line builds its
# binaries into its own bin/k8s-<line>/.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
read -r -a other_lines <<<"${OTHER_LINES:-}"
out=$PWD/_output

"$MAKE" --no-print-directory unit alerts fuzz-smoke etcd
mkdir -p "$out"

pids=()
# ${a[@]+"${a[@]}"}: an empty array under set -u, on bash before 4.4 too.
for l in ${other_lines[@]+"${other_lines[@]}"}; do
  echo "== release line $l: make line-all in the background (log _output/line-k8s$l.log)"
  "$MAKE" --no-print-directory line-all LINE="$l" >"$out/line-k8s$l.log" 2>&1 &
  pids+=($!)
done

status=0
"$MAKE" --no-print-directory integration e2e image-test readme-test signing-test perf-smoke 2>&1 |
  tee "$out/test-default-line.log" || status=$?

logs=("$out/test-default-line.log")
for i in ${other_lines[@]+"${!other_lines[@]}"}; do
  l=${other_lines[$i]}
  log=$out/line-k8s$l.log
  logs+=("$log")
  lstatus=0
  wait "${pids[$i]}" || lstatus=$?
  echo "== release line $l: make line-all (exit $lstatus; full log _output/line-k8s$l.log)"
  if ((lstatus != 0)); then
    grep -E -- '--- FAIL|^FAIL|^panic: |^make.*Error|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: ' "$log" | tail -60 || true
    status=$lstatus
  fi
  tail -15 "$log"
done

if ((status != 0)); then
  echo "== make test failed; what failed, per log (full logs in _output/):"
  for f in "${logs[@]}"; do
    grep -E -- '--- FAIL|^FAIL|^panic: |race detected|^make.*Error' "$f" | sed "s|^|${f##*/}: |" | tail -20 || true
  done
fi
exit "$status"
