#!/usr/bin/env bash
# Regenerates every generated file: deepcopy (controller-gen), args conversions and defaults
# (conversion-gen, defaulter-gen) and the CRD manifests (controller-gen). Tools are pinned as
# go.mod tool directives.
set -euo pipefail
cd "$(dirname "$0")/.."
boilerplate=hack/boilerplate/boilerplate.go.txt

go tool controller-gen object:headerFile="$boilerplate" paths=./pkg/apis/...
go tool controller-gen crd:crdVersions=v1 paths=./pkg/apis/labels/... output:crd:artifacts:config=manifests/crds
# The Helm chart installs the same CRDs from its crds/ folder (Helm cannot read outside the chart).
chart_crds=manifests/charts/pool-scheduler/crds
rm -f "$chart_crds"/*.yaml
for f in manifests/crds/*.yaml; do
  [ "$(basename "$f")" = kustomization.yaml ] || cp "$f" "$chart_crds/"
done

go tool conversion-gen --go-header-file "$boilerplate" \
  --output-file zz_generated.conversion.go \
  ./pkg/apis/config/v1
go tool defaulter-gen --go-header-file "$boilerplate" \
  --output-file zz_generated.defaults.go \
  ./pkg/apis/config/v1
# The admission manifests generated from pkg/admission and the shipped scheduler configuration.
go run ./hack/admission-manifests
