#!/usr/bin/env bash
# Regenerates the replace block for the k8s.io staging modules in a release line's go.mod.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and resolves them through
# replace directives pointing at ./staging; consumers must replace each one with the
# published tag that matches the Kubernetes release. This script reads the staging list
# from k8s.io/kubernetes' own go.mod, so the block never drifts from the pinned release.
#
# Each release line (docs/compatibility.md) has its own go.mod, with the same module path:
# the default line's is ./go.mod, pinned by hack/versions.env; another line's is
# lines/k8s-<minor>/go.mod, pinned by lines/k8s-<minor>/versions.env (read after
# hack/versions.env, so it overrides it) and selected with `go ... -modfile=`. For such a line
# the script also sets the go directive to k8s.io/kubernetes' own, requires the line's pins
# (KUBE_VERSION, CONTROLLER_RUNTIME_VERSION, HELM_VERSION, CERT_CONTROLLER_VERSION,
# SCHEDULER_PLUGINS_VERSION) and every staging module at the staging version, and runs
# `go mod tidy -modfile=` (which writes lines/k8s-<minor>/go.sum). A missing line go.mod is
# first seeded from ./go.mod's direct requirements, so that modules the line does not pin stay
# near the default line's versions instead of jumping to their newest.
#
# Usage: hack/update-gomod-replace.sh            the default line (go.mod; KUBE_VERSION from hack/versions.env)
#        hack/update-gomod-replace.sh 1.36       the 1.36 line (lines/k8s-1.36/go.mod)
set -euo pipefail
cd "$(dirname "$0")/.."
line=${1:-}
# shellcheck source=hack/versions.env
source hack/versions.env
modfile=go.mod
if [ -n "$line" ]; then
  dir=lines/k8s-${line}
  [ -f "$dir/versions.env" ] || { echo "no $dir/versions.env: a line needs its pins there (see docs/compatibility.md)" >&2; exit 1; }
  # shellcheck disable=SC1090
  source "$dir/versions.env"
  modfile=$dir/go.mod
fi
kube_version=${KUBE_VERSION}
staging_version="v0${kube_version#v1}"

kmod=$(go mod download -json "k8s.io/kubernetes@${kube_version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[ -f "$kmod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@${kube_version}" >&2; exit 1; }

mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9.-]*\) => ./staging/src/.*#\1#p' "$kmod" | sort -u)
[ "${#staging[@]}" -gt 0 ] || { echo "no staging replaces found in $kmod" >&2; exit 1; }

args=()
for m in "${staging[@]}"; do
  args+=("-replace=${m}=${m}@${staging_version}")
done

if [ -z "$line" ]; then
  go mod edit "${args[@]}"
  echo "replaced ${#staging[@]} staging modules with ${staging_version}"
  exit 0
fi

kube_go=$(sed -n 's/^go //p' "$kmod")
if [ ! -f "$modfile" ]; then
  # The seed: module path and direct requirements of the default line. Tools: kubectl only
  # (the e2e client of the line's own minor); etcd and the code generators come from the
  # default line.
  {
    sed -n '1p' go.mod
    printf '\ngo %s\n\n' "$kube_go"
    sed -n '/^require (/,/^)/{p;/^)/q}' go.mod
    printf '\ntool k8s.io/kubernetes/cmd/kubectl\n'
  } >"$modfile"
  echo "seeded $modfile from go.mod's direct requirements"
fi
args+=("-go=${kube_go}" "-require=k8s.io/kubernetes@${kube_version}")
pins=(
  "sigs.k8s.io/controller-runtime:${CONTROLLER_RUNTIME_VERSION:-}"
  "helm.sh/helm/v3:${HELM_VERSION:-}"
  "github.com/open-policy-agent/cert-controller:${CERT_CONTROLLER_VERSION:-}"
  # go mod tidy loads every file whatever its build tags, so a line whose build leaves
  # scheduler-plugins out must still require it.
  "sigs.k8s.io/scheduler-plugins:${SCHEDULER_PLUGINS_VERSION:-}"
)
for p in "${pins[@]}"; do
  [ -n "${p#*:}" ] || { echo "$dir/versions.env or hack/versions.env must pin ${p%%:*}" >&2; exit 1; }
  args+=("-require=${p%%:*}@${p#*:}")
done
go mod edit "${args[@]}" "$modfile"
# An absolute -modfile: a relative one would resolve against the cwd of go commands this one
# starts. GOFLAGS is cleared so that a line's -modfile or -tags in the environment cannot apply.
tidy() { GOFLAGS='' go mod tidy -modfile="$PWD/$modfile"; }
tidy
# The staging modules the line requires (directly or not, as tidy found) are required at the
# version they are replaced with, so that go.mod shows no misleading one (v0.0.0, or an older
# minor that a dependency asks for); tidy again to settle go.sum.
staging_requires=()
for m in "${staging[@]}"; do
  if grep -Eq "^[[:space:]]*${m//./\\.} v" "$modfile" && ! grep -Eq "^[[:space:]]*${m//./\\.} ${staging_version//./\\.}( |$)" "$modfile"; then
    staging_requires+=("-require=${m}@${staging_version}")
  fi
done
if [ "${#staging_requires[@]}" -gt 0 ]; then
  go mod edit "${staging_requires[@]}" "$modfile"
  tidy
fi
echo "$modfile: k8s.io/kubernetes ${kube_version}, ${#staging[@]} staging modules replaced with ${staging_version}, go ${kube_go}"
