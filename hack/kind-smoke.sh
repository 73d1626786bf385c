#!/usr/bin/env bash
# The kind smoke: pool-scheduler built from this checkout, installed from an OCI chart into a
# kind cluster, and a short scenario run against it. It needs a Docker engine, so it runs in
# GitHub Actions (.github/workflows/kind.yaml) and on a developer's machine, never in make test
# or .ci/run (no container runtime there). docs/compatibility.md, "The kind smoke".
#
#   hack/kind-smoke.sh [stage...]     stages, in order (default: tools cluster install scenario):
#     tools      kind, Helm (go install, pinned) and kubectl of the node image's version into
#                _output/kind/bin (PATH is set by this script, nothing is installed elsewhere)
#     cluster    a registry:3 container on localhost:$REG_PORT and a kind cluster (one control
#                plane, two workers of the pools "general" and "spot") whose containerd pulls
#                localhost:$REG_PORT from it (kind's local-registry recipe)
#     install    the release line serving the cluster's Kubernetes (the chart's own choice):
#                make image for that line and the node's platform, pushed with hack/release push;
#                the chart packaged with a commit-based version, pushed to oci://localhost:$REG_PORT/charts
#                and installed from there with the pushed digest
#     scenario   a namespace opted in, a Deployment whose pods pool-scheduler places; a pod pinned
#                to the pool "spot" held by NodePoolReady while the pool's labels are missing
#                from its node, and bound once pool-labeler applies them
#     diagnose   nodes, pods, events and the product's logs (the workflow runs it on failure)
#     delete     the cluster and the registry container
#
# Settings (environment): KIND_NODE_IMAGE (default: the 1.36 line's node), KIND_CLUSTER_NAME,
# REG_NAME, REG_PORT, EXPECT_LINE (fail unless the cluster is served by this line).
set -euo pipefail
cd "$(dirname "$0")/.."

# Pins. kind v0.32.0's release notes list the node images built for it; the two the workflow's
# matrix uses are pinned by digest there too (test/static checks the default is one of them).
KIND_VERSION=v0.32.0
HELM_VERSION=v3.21.4
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5}
REGISTRY_IMAGE=registry:3@sha256:1be55279f18a2fe1a74edf2664cac61c1bea305b7b4642dab412e7affdcb3e33
PAUSE_IMAGE=registry.k8s.io/pause:3.10

KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-pool-scheduler-smoke}
REG_NAME=${REG_NAME:-kind-registry}
REG_PORT=${REG_PORT:-5001}
REGISTRY=localhost:${REG_PORT}
CHART=manifests/charts/pool-scheduler
RELEASE_NS=pool-scheduler
SMOKE_NS=smoke
POOL_KEY=nodepool.banzaicloud.io/name
# NodePoolReady's reason for a node whose pool labels are missing (pkg/pool, LabelsNotApplied);
# test/static checks it is the plugin's.
HELD_REASON="node's pool labels are not applied yet"

OUT=$PWD/_output/kind
TOOLS=$OUT/bin
export PATH="$TOOLS:$PATH"
export KUBECONFIG=$OUT/kubeconfig

log() { printf '== %s\n' "$*"; }
fail() { printf '::error::kind smoke: %s\n' "$*" >&2; exit 1; }

# poll <seconds> <what> <command...>: runs the command every 2 s until it succeeds.
poll() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      fail "timed out after ${timeout}s waiting for: $what"
    fi
    sleep 2
  done
}

node_version() {
  local tag=${KIND_NODE_IMAGE#*:}
  tag=${tag%@*}
  [[ $tag =~ ^v1\.[0-9]+\.[0-9]+$ ]] || fail "KIND_NODE_IMAGE=$KIND_NODE_IMAGE: want kindest/node:v1.<minor>.<patch>[@sha256:...]"
  echo "$tag"
}

stage_tools() {
  mkdir -p "$TOOLS"
  log "kind $KIND_VERSION, Helm $HELM_VERSION (go install into $TOOLS)"
  GOFLAGS='' GOBIN=$TOOLS go install "sigs.k8s.io/kind@$KIND_VERSION"
  GOFLAGS='' GOBIN=$TOOLS go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  local v os arch
  v=$(node_version)
  os=$(go env GOHOSTOS)
  arch=$(go env GOHOSTARCH)
  log "kubectl $v ($os/$arch) from dl.k8s.io, checked against its published SHA-256"
  curl -fsSLo "$TOOLS/kubectl" "https://dl.k8s.io/release/$v/bin/$os/$arch/kubectl"
  local want got
  want=$(curl -fsSL "https://dl.k8s.io/release/$v/bin/$os/$arch/kubectl.sha256")
  got=$({ sha256sum "$TOOLS/kubectl" 2>/dev/null || shasum -a 256 "$TOOLS/kubectl"; } | cut -d' ' -f1)
  [[ $got == "$want" ]] || fail "kubectl $v: SHA-256 $got, dl.k8s.io publishes $want"
  chmod +x "$TOOLS/kubectl"
  kind version
  helm version --short
  kubectl version --client
}

stage_cluster() {
  mkdir -p "$OUT"
  if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
    fail "a kind cluster $KIND_CLUSTER_NAME exists already: hack/kind-smoke.sh delete first"
  fi
  if [[ "$(docker inspect -f '{{.State.Running}}' "$REG_NAME" 2>/dev/null || true)" != true ]]; then
    log "registry $REG_NAME on 127.0.0.1:$REG_PORT"
    docker run -d --restart=always -p "127.0.0.1:$REG_PORT:5000" --network bridge --name "$REG_NAME" "$REGISTRY_IMAGE"
  fi
  log "kind cluster $KIND_CLUSTER_NAME ($KIND_NODE_IMAGE): a control plane, a worker of pool general, one of pool spot"
  # The containerd patch is kind's recipe for node images before v0.27 (harmless after): pull
  # through /etc/containerd/certs.d, where hosts.toml below points localhost:$REG_PORT at the
  # registry container.
  kind create cluster --name "$KIND_CLUSTER_NAME" --image "$KIND_NODE_IMAGE" --kubeconfig "$KUBECONFIG" --wait 5m --config - <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
nodes:
- role: control-plane
- role: worker
  labels:
    $POOL_KEY: general
- role: worker
  labels:
    $POOL_KEY: spot
EOF
  local dir="/etc/containerd/certs.d/localhost:$REG_PORT" node
  for node in $(kind get nodes --name "$KIND_CLUSTER_NAME"); do
    docker exec "$node" mkdir -p "$dir"
    printf '[host."http://%s:5000"]\n' "$REG_NAME" | docker exec -i "$node" cp /dev/stdin "$dir/hosts.toml"
  done
  if [[ "$(docker inspect -f '{{json .NetworkSettings.Networks.kind}}' "$REG_NAME")" == null ]]; then
    docker network connect kind "$REG_NAME"
  fi
  # KEP-1755: where the cluster's local registry is.
  kubectl apply -f - <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-registry-hosting
  namespace: kube-public
data:
  localRegistryHosting.v1: |
    host: "$REGISTRY"
    help: "https://kind.sigs.k8s.io/docs/user/local-registry/"
EOF
  kubectl get nodes -L "$POOL_KEY"
}

# The release line serving the cluster's Kubernetes: its own minor, or the one before (a
# kube-scheduler may be one minor older than kube-apiserver), as the chart picks it.
cluster_line() {
  local minor line
  minor=$(kubectl get --raw /version | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p')
  [[ -n $minor ]] || fail "cannot read the cluster's Kubernetes minor"
  for line in $(make -s lines); do
    if [[ $line == "1.$minor" || $line == "1.$((minor - 1))" ]]; then
      echo "$line"
      return
    fi
  done
  fail "Kubernetes 1.$minor: no release line serves it (lines: $(make -s lines))"
}

stage_install() {
  local line sha base chart_version version platform layout digest
  line=$(cluster_line)
  if [[ -n ${EXPECT_LINE:-} && $line != "$EXPECT_LINE" ]]; then
    fail "the cluster is served by line $line, the workflow expects $EXPECT_LINE"
  fi
  # A commit-based version: the chart's next release with the commit as a pre-release
  # (SemVer for the chart; the image tag <version>-k8s<line> the chart derives from appVersion).
  sha=$(git rev-parse --short=12 HEAD)
  [[ -z "$(git status --porcelain --untracked-files=no)" ]] || sha=$sha.dirty
  base=$(sed -n 's/^version: *//p' "$CHART/Chart.yaml")
  chart_version=${base%%-*}-kind.g$sha
  version=v$chart_version
  platform=$(docker version -f '{{.Server.Os}}/{{.Server.Arch}}')
  layout=_output/kind/image
  log "line $line image $version for $platform (make image)"
  make image VERSION="$version" LINES="$line" PLATFORMS="$platform" IMAGE_LAYOUT="$layout"
  log "push to $REGISTRY/pool-scheduler (hack/release push)"
  go run ./hack/release push --repository "$REGISTRY/pool-scheduler" --layout "$layout/k8s-$line" | tee "$OUT/push.txt"
  digest=$(sed -n 's/.*@\(sha256:[0-9a-f]\{64\}\)).*/\1/p' "$OUT/push.txt" | head -1)
  [[ -n $digest ]] || fail "no digest in hack/release push's output"

  log "chart $chart_version (appVersion $version) to oci://$REGISTRY/charts"
  rm -rf "$OUT/chart"
  helm package manifests/charts/pool-scheduler --version "$chart_version" --app-version "$version" --destination "$OUT/chart"
  helm push "$OUT/chart/pool-scheduler-$chart_version.tgz" "oci://$REGISTRY/charts" --plain-http
  cat >"$OUT/values.yaml" <<EOF
image:
  repository: $REGISTRY/pool-scheduler
  digests:
    "$line": "$digest"
EOF
  log "helm install from oci://$REGISTRY/charts/pool-scheduler $chart_version"
  helm install pool-scheduler "oci://$REGISTRY/charts/pool-scheduler" --version "$chart_version" --plain-http \
    --namespace "$RELEASE_NS" --create-namespace --values "$OUT/values.yaml" --wait --timeout 10m
  kubectl -n "$RELEASE_NS" wait --for=condition=Available deployment --all --timeout=5m
  local image
  image=$(kubectl -n "$RELEASE_NS" get deployment pool-scheduler -o jsonpath='{.spec.template.spec.containers[0].image}')
  log "pool-scheduler runs $image"
  [[ $image == "$REGISTRY/pool-scheduler:$version-k8s$line@$digest" ]] \
    || fail "the chart runs $image, want $REGISTRY/pool-scheduler:$version-k8s$line@$digest (line $line, the pushed digest)"
}

# scheduler_of <namespace> <pod>: the component that wrote the pod's Scheduled event.
scheduler_of() {
  kubectl -n "$1" get events --field-selector "involvedObject.kind=Pod,involvedObject.name=$2,reason=Scheduled" \
    -o jsonpath='{range .items[*]}{.reportingComponent}{" "}{.source.component}{"\n"}{end}'
}

admitted_scheduler() {
  kubectl -n "$1" run admission-probe --image="$PAUSE_IMAGE" --restart=Never --dry-run=server -o jsonpath='{.spec.schedulerName}'
}

admission_hands_over() { [[ "$(admitted_scheduler "$SMOKE_NS" 2>/dev/null)" == pool-scheduler ]]; }

labeler_pods_gone() { [[ -z "$(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=pool-labeler -o name)" ]]; }

held_reason_seen() {
  kubectl -n "$SMOKE_NS" get events --field-selector "involvedObject.kind=Pod,involvedObject.name=held,reason=FailedScheduling" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -F "$HELD_REASON"
}

stage_scenario() {
  local pod node sched
  log "namespace $SMOKE_NS opted in (pool-scheduler.io/enabled=true); $SMOKE_NS-off left alone"
  kubectl create namespace "$SMOKE_NS"
  kubectl label namespace "$SMOKE_NS" pool-scheduler.io/enabled=true
  kubectl create namespace "$SMOKE_NS-off"
  # Admission hands pods over only once it sees a healthy pool-scheduler leader (docs/operations.md).
  poll 300 "admission to hand $SMOKE_NS's pods to pool-scheduler (a server-side dry run)" admission_hands_over
  [[ "$(admitted_scheduler "$SMOKE_NS-off")" == default-scheduler ]] \
    || fail "a pod of $SMOKE_NS-off (not opted in) was given to $(admitted_scheduler "$SMOKE_NS-off")"

  log "a Deployment of 3 in $SMOKE_NS: its pods get schedulerName pool-scheduler and pool-scheduler binds them"
  kubectl -n "$SMOKE_NS" create deployment web --image="$PAUSE_IMAGE" --replicas=3
  kubectl -n "$SMOKE_NS" rollout status deployment/web --timeout=5m
  for pod in $(kubectl -n "$SMOKE_NS" get pods -l app=web -o jsonpath='{.items[*].metadata.name}'); do
    [[ "$(kubectl -n "$SMOKE_NS" get pod "$pod" -o jsonpath='{.spec.schedulerName}')" == pool-scheduler ]] \
      || fail "pod $pod: schedulerName is not pool-scheduler"
    node=$(kubectl -n "$SMOKE_NS" get pod "$pod" -o jsonpath='{.spec.nodeName}')
    sched=$(scheduler_of "$SMOKE_NS" "$pod")
    grep -qw pool-scheduler <<<"$sched" || fail "pod $pod on $node: Scheduled by '${sched:-no event}', not pool-scheduler"
    echo "pod $pod: node $node, scheduled by pool-scheduler"
  done

  local spot labeler_replicas
  spot=$(kubectl get nodes -l "$POOL_KEY=spot" -o jsonpath='{.items[0].metadata.name}')
  [[ -n $spot ]] || fail "no node of pool spot"
  log "late labels: pool-labeler stopped, NodePoolLabelSet spot wants example.com/lifecycle=spot, which node $spot lacks"
  labeler_replicas=$(kubectl -n "$RELEASE_NS" get deployment pool-labeler -o jsonpath='{.spec.replicas}')
  kubectl -n "$RELEASE_NS" scale deployment pool-labeler --replicas=0
  poll 180 "pool-labeler's pods to be gone" labeler_pods_gone
  kubectl apply -f - <<EOF
apiVersion: labels.banzaicloud.io/v1alpha1
kind: NodePoolLabelSet
metadata:
  name: spot
  namespace: $RELEASE_NS
spec:
  labels:
    example.com/lifecycle: spot
EOF
  # The scheduler reads label sets through an informer: give it a moment to see the new one.
  sleep 5
  kubectl -n "$SMOKE_NS" apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: held
spec:
  nodeSelector:
    $POOL_KEY: spot
  containers:
  - name: pause
    image: $PAUSE_IMAGE
EOF
  poll 180 "a FailedScheduling event on pod held naming \"$HELD_REASON\"" held_reason_seen
  [[ -z "$(kubectl -n "$SMOKE_NS" get pod held -o jsonpath='{.spec.nodeName}')" ]] \
    || fail "pod held was bound while node $spot lacks its pool's labels"
  kubectl -n "$SMOKE_NS" get pod held -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}'

  log "pool-labeler back ($labeler_replicas replicas): it applies the labels, and the held pod binds to $spot"
  kubectl -n "$RELEASE_NS" scale deployment pool-labeler --replicas="$labeler_replicas"
  kubectl wait --for=jsonpath='{.metadata.labels.example\.com/lifecycle}'=spot "node/$spot" --timeout=5m
  kubectl -n "$SMOKE_NS" wait --for=jsonpath='{.spec.nodeName}'="$spot" pod/held --timeout=3m
  sched=$(scheduler_of "$SMOKE_NS" held)
  grep -qw pool-scheduler <<<"$sched" || fail "pod held: Scheduled by '${sched:-no event}', not pool-scheduler"
  kubectl -n "$SMOKE_NS" wait --for=condition=Ready pod/held --timeout=3m
  log "kind smoke passed"
}

stage_diagnose() {
  set +e
  kubectl get nodes -o wide --show-labels
  kubectl get pods -A -o wide
  kubectl get nodepoollabelsets -A -o yaml
  kubectl -n "$SMOKE_NS" get events --sort-by=.lastTimestamp
  kubectl -n "$RELEASE_NS" get events --sort-by=.lastTimestamp
  helm -n "$RELEASE_NS" status pool-scheduler
  local d
  for d in $(kubectl -n "$RELEASE_NS" get deployments -o name); do
    echo "== logs of $d"
    kubectl -n "$RELEASE_NS" logs "$d" --all-containers --prefix --tail=200
  done
  return 0
}

stage_delete() {
  kind delete cluster --name "$KIND_CLUSTER_NAME" --kubeconfig "$KUBECONFIG" || true
  docker rm -f "$REG_NAME" >/dev/null 2>&1 || true
}

stages=("$@")
((${#stages[@]})) || stages=(tools cluster install scenario)
for s in "${stages[@]}"; do
  case $s in
  tools | cluster | install | scenario | diagnose | delete) "stage_$s" ;;
  *) fail "unknown stage $s (tools, cluster, install, scenario, diagnose, delete)" ;;
  esac
done
