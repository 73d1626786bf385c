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
# Every other release line: the whole tree (tests, integration and scheduler_perf included)
# type-checks against the line's Kubernetes, with its build tags. The flags are make test's
# (Makefile DEV_GOFLAGS), so the line's compiled packages are shared with its tests.
for env in lines/k8s-*/versions.env; do
  tags=$(sed -n 's/^GO_TAGS=//p' "$env")
  echo "go vet, release line ${env#lines/k8s-}" | sed 's|/versions.env||'
  GOFLAGS="-modfile=$PWD/$(dirname "$env")/go.mod${tags:+ -tags=$tags} '-gcflags=all=-l -dwarf=false'" go vet ./...
done

# hack/signing, the release signing tool, is a module of its own (sigstore-go's dependencies
# would fight go.mod's Kubernetes pins; `go vet ./...` above does not enter it): vetted, and its
# go.mod and go.sum tidy.
(cd hack/signing && go vet ./... && go mod tidy -diff) || { echo "hack/signing: go vet failed, or run 'cd hack/signing && go mod tidy'" >&2; exit 1; }

# shellcheck source=hack/versions.env
source hack/versions.env
# GitHub Actions workflows (the release workflow), with actionlint at its pinned version.
go run "github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}" -no-color
# The Helm chart, with the Helm SDK's linter (helm lint --strict) against the pinned Kubernetes.
go run ./hack/release lint-chart --chart manifests/charts/pool-scheduler --kube-version "${KUBE_VERSION}"
# ... and against every other line's Kubernetes (the chart runs that line's image there).
for env in lines/k8s-*/versions.env; do
  go run ./hack/release lint-chart --chart manifests/charts/pool-scheduler --kube-version "$(sed -n 's/^KUBE_VERSION=//p' "$env")"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Snapshot generated outputs, regenerate, compare.
generated=(go.mod pkg/apis manifests/crds manifests/charts/pool-scheduler/crds)
# The other release lines' go.mod and go.sum (docs/compatibility.md), regenerated below.
other_lines=()
for d in lines/k8s-*/; do
  d=${d%/}
  other_lines+=("${d#lines/k8s-}")
  generated+=("$d/go.mod" "$d/go.sum")
done
for g in "${generated[@]}"; do mkdir -p "$tmp/before/$(dirname "$g")"; cp -r "$g" "$tmp/before/$g"; done
hack/update-codegen.sh
hack/update-gomod-replace.sh >/dev/null
for l in "${other_lines[@]}"; do hack/update-gomod-replace.sh "$l" >/dev/null; done
status=0
for g in "${generated[@]}"; do
  if ! diff -r "$tmp/before/$g" "$g"; then
    echo "$g is out of date: run 'make generate' and hack/update-gomod-replace.sh" >&2
    status=1
  fi
done
exit $status
