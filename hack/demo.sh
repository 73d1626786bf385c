#!/usr/bin/env bash
# make demo: builds bin/poolctl and runs `poolctl simulate` on the built-in scenarios, saying what
# it does: one line per stage with the time since the start (the build, counted in packages, then
# each scenario's control plane, scheduler, pods and result). The table goes to stdout as usual,
# the logs to _output/demo/poolctl.log.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
start=$(date +%s)
stage() { printf '[demo %4ss] %s\n' "$(($(date +%s) - start))" "$*"; }

total=$(go list -deps ./cmd/poolctl | wc -l)
stage "building bin/poolctl: up to ${total} packages (the first build compiles kube-apiserver, etcd and the scheduler: minutes on 2 cores)"
compiled=0
# go build -v names each package it compiles (cached ones are not named): count them.
"$MAKE" --no-print-directory poolctl BUILD_V=-v 2>&1 | while IFS= read -r line; do
  if [[ "$line" =~ ^[A-Za-z0-9._/~-]+$ ]]; then
    compiled=$((compiled + 1))
    if ((compiled % 250 == 0)); then stage "building bin/poolctl: ${compiled} packages compiled"; fi
  elif [[ "$line" != GOFLAGS=* && "$line" != "ln -sf "* ]]; then
    echo "$line" # compiler errors, make's messages
  fi
done
stage "built bin/poolctl"

# Every built-in scenario but the 100-node surge upgrade (about 3 min per mode on 2 cores): the
# short maintenance scenarios show the same mechanism; `bin/poolctl simulate --scenario
# surge-upgrade` runs it (docs/scenarios.md). Arguments replace the selection.
args=("$@")
if ((${#args[@]} == 0)); then
  for f in pkg/simulate/scenarios/*.yaml; do
    name=$(basename "$f" .yaml)
    [[ "$name" == surge-upgrade ]] || args+=(--scenario "$name")
  done
fi

# Each maintenance scenario runs with 5 seeds (the batch order, new nodes' zones): one draw
# can land either way, so the table shows each figure's mean and range (DEMO_SEEDS=N changes it).
seeds=${DEMO_SEEDS:-5}

log=_output/demo/poolctl.log
stage "running the scenarios: each on its own embedded etcd + kube-apiserver, under the default scheduler and under pool-scheduler (their logs: ${log})"
# The control planes' and schedulers' logs (klog, etcd's, the etcd client's JSON warnings) go to
# $log; progress lines (stderr) get the demo's clock; the table (stdout) passes through.
{ bin/poolctl simulate --out _output/demo --progress=lines --log-file "$log" --seeds "$seeds" "${args[@]}" 2>&1 1>&3 3>&- | while IFS= read -r line; do stage "$line"; done; } 3>&1
stage "done (logs: ${log})"
