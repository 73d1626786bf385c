#!/usr/bin/env bash
# Fails when the tree is not formatted, vetted, or when generated files or go.mod's replace
# block are not what the generators produce, or when actionlint or Helm's chart lint finds a
# problem.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^vendor/') || true)
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

go vet ./...

# shellcheck source=hack/versions.env
source hack/versions.env
# GitHub Actions workflows (the release workflow), with actionlint at its pinned version.
go run "github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}" -no-color
# The Helm chart, with the Helm SDK's linter (helm lint --strict) against the pinned Kubernetes.
go run ./hack/release lint-chart --chart manifests/charts/pool-scheduler --kube-version "${KUBE_VERSION}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Snapshot generated outputs, regenerate, compare.
generated=(go.mod pkg/apis manifests/crds manifests/charts/pool-scheduler/crds)
for g in "${generated[@]}"; do mkdir -p "$tmp/before/$(dirname "$g")"; cp -r "$g" "$tmp/before/$g"; done
hack/update-codegen.sh
hack/update-gomod-replace.sh >/dev/null
status=0
for g in "${generated[@]}"; do
  if ! diff -r "$tmp/before/$g" "$g"; then
    echo "$g is out of date: run 'make generate' and hack/update-gomod-replace.sh" >&2
    status=1
  fi
done
exit $status
