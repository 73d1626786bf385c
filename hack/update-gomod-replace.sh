#!/usr/bin/env bash
# Regenerates go.mod's replace block for the k8s.io staging modules.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and resolves them through
# replace directives pointing at ./staging; consumers must replace each one with the
# published tag that matches the Kubernetes release. This script reads the staging list
# from k8s.io/kubernetes' own go.mod, so the block never drifts from the pinned release.
#
# Usage: hack/update-gomod-replace.sh            (uses KUBE_VERSION from hack/versions.env)
#        KUBE_VERSION=v1.34.10 hack/update-gomod-replace.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/versions.env
source hack/versions.env
kube_version=${KUBE_VERSION}
staging_version="v0${kube_version#v1}"

modfile=$(go mod download -json "k8s.io/kubernetes@${kube_version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[ -f "$modfile" ] || { echo "cannot find go.mod of k8s.io/kubernetes@${kube_version}" >&2; exit 1; }

mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9.-]*\) => ./staging/src/.*#\1#p' "$modfile" | sort -u)
[ "${#staging[@]}" -gt 0 ] || { echo "no staging replaces found in $modfile" >&2; exit 1; }

args=()
for m in "${staging[@]}"; do
  args+=("-replace=${m}=${m}@${staging_version}")
done
go mod edit "${args[@]}"
echo "replaced ${#staging[@]} staging modules with ${staging_version}"
